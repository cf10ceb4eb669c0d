package strategy_test

import (
	"fmt"
	"time"

	"github.com/bttl/bttl/strategy"
)

func ExamplePolicy_VersionLimit() {
	fmt.Println(strategy.Sequence(3).VersionLimit(),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2)).VersionLimit(),
		strategy.OneSecond().VersionLimit())
	// Output: 3 2 0
}

func ExamplePolicy_ExpiryOffset() {
	fmt.Println(strategy.DefaultExpiry(48*time.Hour).ExpiryOffset(), strategy.OneSecond(strategy.WithDefaultTTL(time.Hour)).ExpiryOffset())
	// Output: 48h0m0s 0s
}

func ExamplePolicy_HasCompanions() {
	fmt.Println(strategy.OneSecond(strategy.WithWriteTime()).HasCompanions(), strategy.OneSecond().HasCompanions())
	// Output: true false
}

func ExamplePolicy_Reserved() {
	p := strategy.OneSecond(strategy.WithWriteTime())
	fmt.Println(p.Reserved(strategy.WriteTimeColumn("body")), p.Reserved("body"), strategy.OneSecond().Reserved("\xff\xffx"))
	// Output: true false false
}

func ExamplePolicy_ReplacesColumn() {
	fmt.Println(strategy.OneSecond(strategy.SingleValue()).ReplacesColumn(), strategy.OneSecond().ReplacesColumn())
	// Output: true false
}

func ExamplePolicy_RefreshesOnRead() {
	fmt.Println(strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce)).RefreshesOnRead(),
		strategy.OneSecond().RefreshesOnRead())
	// Output: true false
}

func ExamplePolicy_TTLCap() {
	fmt.Println(strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)).TTLCap())
	fmt.Println(strategy.OneSecond().TTLCap())
	// Output:
	// 1h0m0s true
	// 0s false
}
