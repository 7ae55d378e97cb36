"""Durations given to envcheck (``envcheck.durations``, the one place they are parsed): each kind
within its stated maximum, and every option and variable that takes one refusing a value past
it with exit 2, naming the maximum, before anything is written (the env's own cases, an index's
timeout and a validation's, are in test_torch_envs.py and test_validate.py)."""
from __future__ import annotations

import pytest

from envcheck.durations import MAX_AGE_S, MAX_WAIT_S, age, seconds
from envcheck.errors import UsageError


def test_each_kind_takes_its_maximum_and_refuses_past_it():
    assert seconds("86400") == MAX_WAIT_S == 86400 and seconds(" 0.5 ") == 0.5 and seconds("0", zero=True) == 0
    assert age("365d") == MAX_AGE_S == 365 * 86400 and age("24h") == 86400 and age("0") == 0
    for text in ("86400.001", "1e10", "inf", "1e400"):  # 1e400 is inf as a float
        with pytest.raises(UsageError, match=r"is past the maximum, 86400 seconds \(1 day\)"):
            seconds(text)
    for text in ("365.01d", "31536001", "9" * 400 + "d"):
        with pytest.raises(UsageError, match=r"is past the maximum, 31536000 seconds \(365 days\)"):
            age(text)
    for text in ("nan", "-1", "0", "soon", ""):
        with pytest.raises(UsageError, match="is not a number of seconds above 0"):
            seconds(text)
    with pytest.raises(UsageError, match="bad age"):
        age("1e10")  # an age is digits and a unit: no exponent


WAIT = "is past the maximum, 86400 seconds (1 day)"
AGE = "is past the maximum, 31536000 seconds (365 days)"


@pytest.mark.parametrize("args, says", [
    (("check", "--env", "pt", "--max-age", "366d"), f"--max-age 366d: '366d' {AGE}"),
    (("check", "--env", "pt", "--max-age", "9" * 40), AGE),  # the stored-pass answer too
    (("serve", "--revalidate-every", "400d"), f"--revalidate-every 400d: '400d' {AGE}"),
    (("doctor", "--timeout", "1e10"), f"--timeout 1e10: '1e10' {WAIT}"),
    (("provision", "--preset", "tensorflow-cpu", "--timeout", "1e10"), WAIT),
    (("provision", "--preset", "tensorflow-cpu", "--wait", "1e10"), f"--wait 1e10: '1e10' {WAIT}"),
    (("cache", "clean", "--yes", "--wait", "1e10"), f"--wait 1e10: '1e10' {WAIT}"),
    (("fleet", "doctor", "--timeout", "1e10"), WAIT),
    (("fleet", "validate", "--device-timeout", "1e10"), f"--device-timeout 1e10: '1e10' {WAIT}"),
    (("fleet", "validate", "--busy-after", "1e10"), f"--busy-after 1e10: '1e10' {WAIT}"),
    (("serve", "--port", "65536"), "65535"),  # a port's maximum, as click says it
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else None)
def test_every_duration_option_past_its_maximum_is_exit_2_naming_it(cli, home, args, says):
    r = cli(*args, timeout=120)
    assert r.code == 2 and says in r.err and r.out == "", r.err
    assert "Traceback" not in r.err and list(home.iterdir()) == []


def test_a_wait_of_zero_is_allowed_where_it_means_do_not_wait(cli, home):
    r = cli("provision", "--preset", "no-such-preset", "--wait", "0", timeout=120)
    assert r.code == 2 and "unknown preset 'no-such-preset'" in r.err, r.err  # past --wait's parsing
