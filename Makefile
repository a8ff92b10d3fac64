PYTHON ?= python3

.PHONY: test test-all grade bench torture mutate-ops zipapp
test:
	$(PYTHON) tests/run.py

# The suite and the grader under every CPython version found here (PATH and pyenv), one build each, one line each.
# SKIP=python3 leaves out an interpreter already tested (CI: the one `make test` ran).
test-all:
	$(PYTHON) tests/all_pythons.py $(foreach p,$(SKIP),--skip $(p))

grade:
	$(PYTHON) grade.py

bench:
	$(PYTHON) bench/run.py

# issue 9's crash matrix and seeded soak; SEED=n reproduces a soak schedule
torture:
	$(PYTHON) -m tests.torture $(if $(SEED),--seed $(SEED))

# issue 18: mutants of the operator code against the tests that cover them (minutes; not in make test or CI)
mutate-ops:
	$(PYTHON) tests/mutate_ops.py

# issue 29: one file for hosts without pip: python3 outbox-kit.pyz outbox|sink|grade ...
zipapp:
	$(PYTHON) backend/kitbuild.py zipapp outbox-kit.pyz
