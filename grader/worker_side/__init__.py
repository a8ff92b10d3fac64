"""The worker's side of the grader: the only code that runs in a process that imported the worker.

It decides nothing. main.py imports the worker (the kit off sys.path) and
runs the sink role or a step; calls.py makes the calls the deciding side
(grader/remote.py) asks for and answers with what they returned. Whatever a
worker does to these modules changes at most the answers to its own calls:
every verdict is decided in the grader's own process, from observations the
worker does not make (docs/audit.md, "What each check rests on").
"""
