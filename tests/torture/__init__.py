"""The crash matrix and the seeded soak behind `make torture` (issue 9).

Kills real processes at every numbered point of the delivery path, recovers
with fresh processes, and checks the invariants against the DB files. Every
crash point is reached from outside the library: wrappers around the
callables the kit takes, SQLite trace callbacks, commands on a child's stdin.
"""
