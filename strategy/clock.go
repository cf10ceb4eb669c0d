package strategy

import "time"

// Clock tells the time. It is the one clock type of bttl: ttlclient,
// wireguard, migrate and provision take it (WithClock), so that every
// timestamp written and every expiry judged comes from it, and tests move
// time instead of sleeping. It is defined here, in the package all of them
// import, and takes no other time from the strategy math.
type Clock interface {
	Now() time.Time
}
