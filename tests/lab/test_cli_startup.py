"""What `nslab` loads at start: a headless `nslab up` pays for the simulation, not for every command."""

import subprocess
import sys
from pathlib import Path

NSLAB = str(Path(sys.executable).with_name("nslab"))


def test_the_parser_does_not_load_the_scenarios_or_the_workshop():
    code = ("import sys, lab.cli; lab.cli.build_parser(); "
            "print(sorted(m for m in ('lab.control.scenarios', 'chaos.scenario', 'lab.workshop.check', "
            "'lab.workshop.course', 'lab.workshop.override') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_console_script_exits_with_the_commands_code(tmp_path):
    # nslab runs lab.cli:entry, which exits without collecting the objects left: the code and the
    # output are main()'s all the same.
    assert subprocess.run([NSLAB, "scenarios"], capture_output=True, text=True).returncode == 0
    result = subprocess.run([NSLAB, "up", "--headless", "--config", str(tmp_path / "none.toml")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("nslab up:")
