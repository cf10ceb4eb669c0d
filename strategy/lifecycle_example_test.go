package strategy_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/bttl/bttl/strategy"
)

func ExampleWithMaxTTL() {
	p := strategy.OneSecond(strategy.WithMaxTTL(20*365*24*time.Hour, strategy.RefuseLonger)) // Cassandra's cap
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := p.WriteTimestamp(now, 21*365*24*time.Hour)
	fmt.Println(errors.Is(err, strategy.ErrTTLTooLong))
	fmt.Println(p)
	// Output:
	// true
	// one-second+maxttl(175200h0m0s)
}

func ExampleWithMaxTTL_clamp() {
	p := strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(24*time.Hour, strategy.ClampLonger))
	ttl, err := p.CapTTL(48 * time.Hour)
	fmt.Println(ttl, err)
	// Output: 24h0m0s <nil>
}

func ExamplePolicy_CapTTL() {
	p := strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger))
	fmt.Println(p.CapTTL(time.Minute))
	_, err := p.CapTTL(2 * time.Hour)
	fmt.Println(err)
	// Output:
	// 1m0s <nil>
	// bttl: TTL over the family's max TTL: 2h0m0s is over the family's max TTL 1h0m0s
}

func ExamplePolicy_MaxTTL() {
	p := strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger))
	fmt.Println(p.MaxTTL(), strategy.OneSecond().MaxTTL())
	// Output: 1h0m0s 0s
}

func ExamplePolicy_ClampsTTL() {
	fmt.Println(strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)).ClampsTTL())
	// Output: true
}

func ExampleWithWriteTime() {
	p := strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime())
	fmt.Println(p, p.Validate())
	// Output: default-expiry(D=1h0m0s)+writetime <nil>
}

func ExamplePolicy_HasWriteTime() {
	fmt.Println(strategy.OneSecond(strategy.WithWriteTime()).HasWriteTime(), strategy.OneSecond().HasWriteTime())
	// Output: true false
}
