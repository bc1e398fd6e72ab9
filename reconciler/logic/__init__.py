"""Pure logic of migplan: functions from values to values. No I/O, no clock, no adapters."""
