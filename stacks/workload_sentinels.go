package stacks

import (
	"kolotoc/components/dask"
)

// The sentinels (kolotoc:sentinels): Dask workers in a container beside each tower
// (components/dask), deployed with the towers (deployTowers).
var sentinelsWorkload = &workload{
	key:      dask.SentinelsKey,
	enabled:  func(c *Config) bool { return c.Sentinels.Enabled },
	defaults: func(c *Config) { c.Sentinels.Default() }, // the sentinels' are all their own
	check:    (*Config).validateSentinels,
}

func (c *Config) validateSentinels(v *validator) {
	s := c.Sentinels
	switch {
	case !c.Towers.Enabled:
		if s.Enabled {
			v.add("sentinels.enabled", "true", "sentinels run beside towers; enable towers or turn sentinels off")
		}
	case s.Enabled:
		s.Validate(v) // the sentinels' own settings (components/dask/config.go)
		v.quantity("sentinels.memory", s.Memory)
		v.quantity("sentinels.cpu", s.CPU)
	case s.WatchProcesses:
		v.add("sentinels.watchProcesses", "true", "shares a tower's processes with its sentinel; needs sentinels.enabled: true")
	}
}
