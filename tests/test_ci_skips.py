"""Under CI=true a skipped test fails unless its skip is declared optional (tests/conftest.py),
so a CI run that lost a browser, a server or a package is red instead of quietly green."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SKIPPING = """
import pytest

def test_runs():
    pass

def test_needs_a_browser():
    pytest.skip("no Chromium at /usr/bin/chromium")

@pytest.mark.skipif(True, reason="no server")
def test_skipped_by_a_mark():
    pass

@pytest.mark.optional_skip("another operating system's test")
def test_optional():
    pytest.importorskip("no_such_module_for_this_test")

@pytest.mark.xfail(reason="a known bug")
def test_known_bug():
    assert False
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text("utf-8"))
    pytester.makepyfile(test_skipping=SKIPPING)
    return pytester


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_an_undeclared_skip_fails(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    # A skip mark skips in the setup phase: failing there, it counts as an error.
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1, xfailed=1)
    output = result.stdout.str()
    assert "skipped under CI=true: no Chromium at /usr/bin/chromium" in output
    assert "skipped under CI=true: no server" in output
    assert "declared optional skips: 1" in output
    assert "test_optional: could not import 'no_such_module_for_this_test'" in output
    assert "(optional: another operating system's test)" in output
    assert "skips that fail under CI=true" not in output


def test_without_ci_skips_stay_skips_and_are_listed(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=3, xfailed=1)
    output = result.stdout.str()
    assert "skips that fail under CI=true: 2" in output
    assert "test_needs_a_browser: no Chromium at /usr/bin/chromium" in output
    assert "declared optional skips: 1" in output


def test_under_ci_a_module_skipped_while_collected_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text("utf-8"))
    pytester.makepyfile(
        test_module_skip="import pytest\npytest.importorskip('no_such_module_for_this_test')\n"
    )
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    assert "skipped under CI=true: could not import" in result.stdout.str()
    assert result.ret != 0
