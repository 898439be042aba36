"""What the tests, the benches and the tools share: the browser harness (a Streamlit server and headless
Chromium), the hostile inputs and their expected one-line refusals, the crafted model files. Not under tests/,
so that bench/ and tools/ never import tests (the lint-imports contract "bench, tools and lens_testing never import tests")."""
