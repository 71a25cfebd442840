"""Lock primitives built on a client's backend and renewer."""
