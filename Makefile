# The two commands a newcomer needs: `make demo` and `make test`.
# Everything else is a step they depend on.
SHELL := /bin/bash
NODE_MODULES_STAMP := node_modules/.postern-installed
ADDON := native/build/Release/postern_native.node

.PHONY: all install build check test demo bench clean

all: build

# npm ci also builds the native addon (package.json "install" script).
$(NODE_MODULES_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

install: $(NODE_MODULES_STAMP)

# Rebuilt only when its sources changed since it was built. make decides
# from the times it read before `npm ci` ran, when the addon may not have
# existed yet, so the recipe looks again: right after npm ci it is current.
$(ADDON): native/peercred.c native/binding.gyp | $(NODE_MODULES_STAMP)
	@if [ -e $@ ] && [ $@ -nt native/peercred.c ] && [ $@ -nt native/binding.gyp ]; then echo "$@ is up to date"; else node native/build.js; fi

build: install $(ADDON)
	npx tsc -p tsconfig.json
	chmod +x dist/cli/main.js

# Type-checks everything and compiles the tests (with the modules they
# import) to test-build/, which tap runs: no TypeScript loader in each test
# process. Emptied first, so a test removed from test/ is not run.
check: install
	rm -rf test-build
	npx tsc -p tsconfig.test.json
	node scripts/lint.mjs
	npx prettier --check 'daemon/**/*.ts' 'cli/**/*.ts' 'shared/**/*.ts' 'test/**/*.ts'

# The long suites (200 kill -9s, figures at --kdf moderate) run on their own,
# one file at a time (the figures want a quiet machine), with a 40-minute
# limit per file; everything else must finish in 180 s a file, three files
# at a time (package.json).
LONG_TIMEOUT := 2400

# A failure is printed again at the end of the output, with its context.
# tap's plugin set (package.json: without its TypeScript and mock plugins)
# is built first: a run that finds it out of date builds it, but still
# starts every file of that run with the previous set's loaders.
test: build check
	npx tap build
	scripts/run-tests.sh .tap/main.log
	scripts/run-tests.sh .tap/long.log --timeout $(LONG_TIMEOUT) --jobs 1 --exclude 'test-build/test/helpers/**' test-build/test/long/*.test.js

demo: build
	bash scripts/demo.sh

bench: build
	node bench/run.js

clean:
	rm -rf dist test-build native/build .tap
