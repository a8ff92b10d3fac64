PYTHON ?= python3

.PHONY: test grade bench torture
test:
	$(PYTHON) tests/run.py

grade:
	$(PYTHON) grade.py

bench:
	$(PYTHON) tests/bench.py

# issue 9's crash matrix and seeded soak; SEED=n reproduces a soak schedule
torture:
	$(PYTHON) -m tests.torture $(if $(SEED),--seed $(SEED))
