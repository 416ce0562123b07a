"""The viewer page, read out of Sources/ViewerServer/ViewerPage.swift (its only copy).

The page is a Swift raw string: every line between `let viewerPageHTML = #\"\"\"`
and the closing `\"\"\"#`, joined with newlines. The Swift test
ViewerServerTests "The page in ViewerPage.swift reads back exactly by the Python
rule" checks that this rule gives exactly the string camagent serves.
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "Sources", "ViewerServer", "ViewerPage.swift")


def page_html(source=SOURCE):
    lines = open(source, encoding="utf-8").read().split("\n")
    start = lines.index('let viewerPageHTML = #"""')
    end = lines.index('"""#', start + 1)
    return "\n".join(lines[start + 1:end])


if __name__ == "__main__":
    print(page_html())
