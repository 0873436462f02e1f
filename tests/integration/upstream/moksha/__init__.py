# Stand-in (tests only): see tests/integration/upstream/README.md.
