"""Progress (scoreband.progress): piped output gets plain lines with the rate, never wider
than the console."""

import io

from rich.console import Console

from scoreband.progress import row_progress, step_status


def test_progress_when_piped_prints_lines_with_rate():
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False, width=80)
    with row_progress(con, "scoring", 200, every=0.25) as update:
        for k in range(0, 201, 10):
            update(k)
    lines = [ln for ln in buf.getvalue().splitlines() if ln]
    assert len(lines) == 4 and "200/200 rows (100%)" in lines[-1] and "rows/s" in lines[0]
    buf.seek(0)
    buf.truncate(0)
    with step_status(con, "demo") as step:
        step("clean set")
    assert "clean set" in buf.getvalue() and all(len(x) <= 80 for x in
                                                  buf.getvalue().splitlines())
