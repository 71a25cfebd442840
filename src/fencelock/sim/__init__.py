"""Deterministic simulation: the real asyncio client driven in virtual time against
model servers over a faulty network, every invariant checked after every step, every
run decided by its seed (``python -m fencelock.sim --seed N`` replays one)."""

from fencelock.sim.world import Outcome, Plan, run

__all__ = ["Outcome", "Plan", "run"]
