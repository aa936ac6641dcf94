"""The operator's guide holds: the alert rules are valid Prometheus rules over metrics the
service exposes (promtool when installed, and our own check of names and labels always), and
every command the guide names exists."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import Counter, Histogram

from app import metrics

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "docs" / "prometheus-alerts.yml"
GUIDE = ROOT / "docs" / "operations.md"
# Series the rules may read that other exporters provide (the scrape itself, blackbox).
EXTERNAL = {"up": {"job", "instance"}, "probe_success": {"job", "instance"}}
DURATION = re.compile(r"^\d+[smhd]$")
SELECTOR = re.compile(r"\b([a-z_:][a-z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r"\s*([a-z_][a-z0-9_]*)\s*(=~|!~|!=|=)\s*\"[^\"]*\"\s*")


def exposed_series() -> dict[str, set[str]]:
    """Every series name the service's /metrics can show, with its label names."""
    series: dict[str, set[str]] = {}
    for value in vars(metrics).values():
        if isinstance(value, Counter):
            series[f"{value._name}_total"] = set(value._labelnames)
        elif isinstance(value, Histogram):
            labels = set(value._labelnames)
            series[f"{value._name}_bucket"] = labels | {"le"}
            series[f"{value._name}_sum"] = labels
            series[f"{value._name}_count"] = labels
    return series


def rules() -> list[dict]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_alert_rules_pass_promtool():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus): the rules are only "
                    "checked by test_alert_rules_read_only_series_the_service_exposes")
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_duration_a_severity_and_words_for_the_operator():
    found = rules()
    assert len(found) >= 6
    assert len({rule["alert"] for rule in found}) == len(found)
    for rule in found:
        assert DURATION.match(rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_alert_rules_read_only_series_the_service_exposes():
    """A renamed metric or label would leave an alert that can never fire; promtool cannot
    know our names, so they are checked here."""
    known = {**exposed_series(), **EXTERNAL}
    for rule in rules():
        expr = rule["expr"]
        assert expr.count("(") == expr.count(")") and expr.count("[") == expr.count("]")
        for name in re.findall(r"\bmemory_[a-z_]+\b", expr):
            assert name in known, f"{rule['alert']}: no series {name}"
        for name, matchers in SELECTOR.findall(expr):
            assert name in known, f"{rule['alert']}: no series {name}"
            for label in (m.group(1) for m in MATCHER.finditer(matchers)):
                assert label in known[name], f"{rule['alert']}: {name} has no label {label}"


def test_the_guide_is_linked_from_the_readme_and_links_the_rules():
    assert "(docs/operations.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "prometheus-alerts.yml" in GUIDE.read_text(encoding="utf-8")


def test_every_command_the_guide_names_exists(runner):
    commands = set(re.findall(r"flask --app wsgi ([a-z-]+(?: [a-z-]+)?)",
                              GUIDE.read_text(encoding="utf-8")))
    assert {"db upgrade", "prune"} <= {c if c.startswith("db ") else c.split()[0]
                                       for c in commands}
    for command in commands:
        words = command.split()
        if words[0] == "db":
            continue  # Flask-Migrate's group, not the app's
        result = runner.invoke(args=[words[0], "--help"])
        assert result.exit_code == 0, f"flask --app wsgi {command}: {result.output}"
