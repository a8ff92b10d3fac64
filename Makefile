PYTHON ?= python3

.PHONY: test grade bench
test:
	$(PYTHON) tests/run.py

grade:
	$(PYTHON) grade.py

bench:
	$(PYTHON) bench/run.py

