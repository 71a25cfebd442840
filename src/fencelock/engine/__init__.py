"""Pure logic, no I/O and no clock reads: time is always passed in."""
