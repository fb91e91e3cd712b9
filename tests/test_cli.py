"""The command line refuses in one line what would run a configuration twice or never end:
non-finite numbers, a value given twice in a list."""
from __future__ import annotations

import pytest

from bench import cli


def parse(*argv: str):
    return cli.build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv,message", [
    (["--timeout", "nan"], "'nan': expected a number > 0"), (["--timeout", "inf"], "'inf': expected a number > 0"),
    (["--min-window-s", "nan"], "'nan': expected a number > 0"),
    (["--dali-hw-decoder-load", "nan"], "'nan': expected a number from 0 to 1"),
    (["--dali-hw-decoder-load", "1.5"], "'1.5': expected a number from 0 to 1"),
    (["--batch-size", "64,64"], "'64,64': 64 is given twice; give each value once"),
    (["--pipelines", "prefetch,resident,prefetch"], "prefetch is given twice"),
    (["--models", "resnet18,resnet18"], "resnet18 is given twice"),
    (["--modes", "loader,loader"], "loader is given twice"),
])
def test_non_finite_numbers_and_repeated_values_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        parse("sweep", *argv)
    assert done.value.code == 2 and message in capsys.readouterr().err


def test_a_claim_named_twice_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse("claims", "--claims", "1,1")
    assert "is given twice" in capsys.readouterr().err
