PYTHON ?= python3

.PHONY: test test-all grade bench
test:
	$(PYTHON) tests/run.py

# The suite and the grader under every CPython found here (PATH and pyenv), one line each.
test-all:
	$(PYTHON) tests/all_pythons.py

grade:
	$(PYTHON) grade.py

bench:
	$(PYTHON) tests/bench.py
