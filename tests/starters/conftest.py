"""The CLI's tests run on the dev server with growth's search attributes (`approvals` lists by them)."""

from tests.workflows.conftest import search_env  # noqa: F401 - the fixture, shared
