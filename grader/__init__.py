"""grader: the package behind grade.py, which proves "two deliveries, one application".

registry.py lists every check (its row: name, needs, the function that runs
it); worker_side/ is the only code that touches the worker under test, in
child processes, and it decides nothing: it makes the calls remote.py asks
for, and checks.py, drivers.py and scenarios.py judge in the grader's own
process (the boundary is the folder); contain.py bounds those processes (limits, supervisors, the zygote that forks each
step) and capture.py their output; parent.py and scenarios.py run them and
observe the DBs; classroom.py grades one worker or a class; results.py turns
the verdicts into data, render/ renders them one module per format and
report.py writes --report DIR; messages.py holds every line printed for a person; cli.py is the
command line. Nothing here is imported by outbox/ or sink/.
"""

__version__ = "4.0.0"
