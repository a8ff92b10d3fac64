"""grader: the package behind grade.py, which proves "two deliveries, one application".

registry.py holds every check (one definition each); child.py is the only
module that touches the worker under test, in child processes; parent.py and
scenarios.py run those processes and observe the DBs; messages.py holds every
line printed for a person; cli.py is the command line. Nothing here is
imported by outbox/ or sink/.
"""

__version__ = "3.0.0"
