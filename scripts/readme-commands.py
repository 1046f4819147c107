"""The README's two first-screen commands, for ``.ci/run`` to run as written.

``readme-commands.py README.md`` writes the first two fenced ``sh`` blocks of the README
(the install-and-run command, then the test command), NUL-separated, and fails unless
there are two. ``readme-commands.py --executed JUNIT.xml`` prints how many tests a pytest
run executed and skipped (its JUnit XML report), and fails when it executed none.
"""

import re
import sys
import xml.etree.ElementTree as ElementTree


def commands(readme: str) -> list[str]:
    """The first two ``sh`` blocks of ``readme``'s text, without their fences."""
    blocks = re.findall(r"^```sh\n(.*?)^```", readme, flags=re.DOTALL | re.MULTILINE)
    if len(blocks) < 2:
        sys.exit("the README's first screen lacks its two sh commands (install-and-run, tests)")
    return [block.strip() for block in blocks[:2]]


def executed(report: str) -> int:
    """Print what the JUnit report ``report`` counts; return how many tests ran."""
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None, f"{report} holds no testsuite"
    total, skipped = int(suite.get("tests", "0")), int(suite.get("skipped", "0"))
    print(f"the README's test command executed {total - skipped} tests and skipped {skipped}")
    return total - skipped


if __name__ == "__main__":
    if sys.argv[1] == "--executed":
        sys.exit(0 if executed(sys.argv[2]) > 0 else 1)
    with open(sys.argv[1], encoding="utf-8") as readme:
        sys.stdout.write("\0".join(commands(readme.read())))
