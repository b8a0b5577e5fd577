"""What registration refuses, before anything is served: skills the extension
(and the Agent Skills specification) forbid, files outside a skill's folder,
and generated skills declared wrongly. Plus the front matter's YAML rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from flask import Flask

from flask_mcp import MCP
from flask_mcp.features.skills.frontmatter import FrontMatterError, parse, render


def mcp_for_test() -> MCP:
    app = Flask("folders")
    app.config.update({"MCP_BACKEND": "memory://", "TESTING": True})
    return MCP(app)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def skill(folder: Path, front: str = "name: {name}\ndescription: Does things", body: str = "# Body\n") -> Path:
    write(folder / "SKILL.md", "---\n" + front.format(name=folder.name) + "\n---\n\n" + body)
    return folder


def refused(path: Path, *fragments: str, **options: object) -> None:
    mcp = mcp_for_test()
    with pytest.raises(ValueError) as caught:
        mcp.skills_from_directory(path, **options)  # type: ignore[arg-type]
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert len(mcp.skills) == 0  # all or nothing


# ---------------------------------------------------------------------- what the spec forbids


def test_a_skill_md_without_front_matter_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "plain/SKILL.md", "# No front matter\n")

    refused(tmp_path, "does not begin with YAML front matter")


def test_front_matter_without_a_name_is_refused(tmp_path: Path) -> None:
    skill(tmp_path / "nameless", front="description: Does things")

    refused(tmp_path, "has no name")


def test_a_name_that_does_not_match_its_folder_is_refused(tmp_path: Path) -> None:
    skill(tmp_path / "deploy", front="name: release\ndescription: Does things")

    refused(tmp_path, "'release'", "'deploy'", "rename one")


@pytest.mark.parametrize("name", ["Deploy", "deploy--fast", "-deploy", "deploy_fast", "x" * 65])
def test_a_folder_name_that_breaks_the_naming_rules_is_refused(tmp_path: Path, name: str) -> None:
    skill(tmp_path / name)

    refused(tmp_path, "naming rules")


@pytest.mark.parametrize("front", [
    "name: terse", "name: terse\ndescription: ''", "name: terse\ndescription: [a, b]",
    "name: terse\ndescription: " + "x" * 1025,
])
def test_a_description_missing_empty_or_over_1024_characters_is_refused(tmp_path: Path, front: str) -> None:
    skill(tmp_path / "terse", front=front)

    refused(tmp_path, "description of 1-1024 characters")


def test_a_compatibility_over_500_characters_is_refused(tmp_path: Path) -> None:
    skill(tmp_path / "picky", front="name: picky\ndescription: d\ncompatibility: " + "x" * 501)

    refused(tmp_path, "compatibility")


def test_a_symlinked_file_leading_outside_the_skill_is_refused(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.txt", "password")
    folder = skill(tmp_path / "skills/leaky")
    os.symlink(secret, folder / "notes.md")

    refused(tmp_path / "skills", "outside the skill's folder", "notes.md")


def test_a_symlinked_folder_leading_outside_the_skill_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "private/keys.txt", "key")
    folder = skill(tmp_path / "skills/leaky")
    os.symlink(tmp_path / "private", folder / "refs")

    refused(tmp_path / "skills", "outside the skill's folder")


def test_a_symlink_into_another_skill_is_refused_too(tmp_path: Path) -> None:
    other = skill(tmp_path / "other")
    folder = skill(tmp_path / "leaky")
    os.symlink(other / "SKILL.md", folder / "copy.md")

    refused(tmp_path, "outside the skill's folder")


def test_a_symlink_inside_the_skill_serves_its_target_bytes(tmp_path: Path) -> None:
    folder = skill(tmp_path / "linked")
    write(folder / "docs/guide.md", "guide")
    os.symlink(folder / "docs/guide.md", folder / "guide.md")
    mcp = mcp_for_test()

    mcp.skills_from_directory(tmp_path)

    (entry,) = [s.entry() for s in mcp.skills]
    assert [r["uri"] for r in entry["resources"]] == [
        "skill://linked/SKILL.md", "skill://linked/docs/guide.md", "skill://linked/guide.md"]
    assert entry["resources"][1]["digest"] == entry["resources"][2]["digest"]


def test_a_skill_over_the_file_limit_is_refused(tmp_path: Path) -> None:
    folder = skill(tmp_path / "huge")
    for index in range(512):
        write(folder / f"files/{index}.txt", "x")

    refused(tmp_path, "512 files")


def test_hidden_files_and_byte_code_are_left_out(tmp_path: Path) -> None:
    folder = skill(tmp_path / "tidy")
    write(folder / ".env", "SECRET=1")
    write(folder / ".git/config", "[core]")
    write(folder / "scripts/__pycache__/run.cpython-311.pyc", b"\x00")
    write(folder / "scripts/run.py", "print('hi')\n")
    mcp = mcp_for_test()

    mcp.skills_from_directory(tmp_path)

    (entry,) = [s.entry() for s in mcp.skills]
    assert [r["uri"] for r in entry["resources"]] == ["skill://tidy/SKILL.md", "skill://tidy/scripts/run.py"]


def test_a_directory_that_is_itself_a_skill_is_served_under_its_own_name(tmp_path: Path) -> None:
    folder = skill(tmp_path / "solo")
    mcp = mcp_for_test()

    assert mcp.skills_from_directory(folder) == ["skill://solo/SKILL.md"]


def test_a_missing_directory_or_one_without_skills_is_refused(tmp_path: Path) -> None:
    refused(tmp_path / "absent", "is not a directory")
    write(tmp_path / "empty/README.md", "nothing")
    refused(tmp_path / "empty", "No SKILL.md")


def test_registering_the_same_skill_twice_is_refused(tmp_path: Path) -> None:
    skill(tmp_path / "once")
    mcp = mcp_for_test()
    mcp.skills_from_directory(tmp_path)

    with pytest.raises(ValueError, match="already registered"):
        mcp.skills_from_directory(tmp_path)
    assert len(mcp.skills) == 1


def test_a_scopes_mapping_must_name_skills_that_exist(tmp_path: Path) -> None:
    skill(tmp_path / "billing")

    refused(tmp_path, "'biling'", scopes={"biling": ["billing:read"]})


def test_a_prefix_must_be_made_of_valid_uri_segments(tmp_path: Path) -> None:
    skill(tmp_path / "deploy")

    refused(tmp_path, "prefix segment", prefix="acme corp/ops")


# ---------------------------------------------------------------------- generated skills


def test_a_generated_skill_needs_a_valid_name_a_description_and_no_parameters() -> None:
    mcp = mcp_for_test()

    def undocumented() -> str:
        return "body"

    def takes_arguments(day: str) -> str:
        return day

    with pytest.raises(ValueError, match="naming rules"):
        mcp.add_skill(undocumented, name="Bad_Name", description="x")
    with pytest.raises(ValueError, match="needs a description"):
        mcp.add_skill(undocumented)
    with pytest.raises(TypeError, match="takes no parameters"):
        mcp.add_skill(takes_arguments, description="x")
    with pytest.raises(ValueError, match="name=..."):
        mcp.add_skill(undocumented, description="x", frontmatter={"name": "other"})
    with pytest.raises(ValueError, match="JSON cannot carry"):
        mcp.add_skill(undocumented, description="x", frontmatter={"when": {1, 2}})
    with pytest.raises(ValueError, match="cache_scope"):
        mcp.add_skill(undocumented, description="x", cache_scope="shared")
    assert len(mcp.skills) == 0


def test_the_skill_decorator_returns_the_function_unchanged() -> None:
    mcp = mcp_for_test()

    def release_notes() -> str:
        """Summarise the release."""
        return "# Notes"

    assert mcp.skill()(release_notes) is release_notes
    assert release_notes() == "# Notes"
    assert [s.uri for s in mcp.skills] == ["skill://release-notes/SKILL.md"]


# ---------------------------------------------------------------------- front matter YAML


def test_front_matter_follows_yaml_1_2_core_rules_not_yaml_1_1() -> None:
    text = (
        "---\nname: x\ndescription: d\non-call: yes\nreviewed: 2026-11-02\nmode: 017\nhex: 0x1F\noct: 0o17\n"
        "ratio: 1.5\nflag: true\nempty:\nlist: [a, 1]\n---\nbody"
    )

    assert parse(text, "SKILL.md") == {
        "name": "x", "description": "d", "on-call": "yes", "reviewed": "2026-11-02", "mode": 17, "hex": 31,
        "oct": 15, "ratio": 1.5, "flag": True, "empty": None, "list": ["a", 1],
    }


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("name: x\nname: y", "duplicate key"),
    ("name: [unclosed", "not valid YAML"),
    ("- a\n- b", "must be a YAML mapping"),
    ("name: x\nweight: .inf", "JSON cannot carry"),
    ("name: x\nwhen: !!timestamp 2026-01-01", "JSON cannot carry"),
    ("name: x\n1: one", "keys must be strings"),
])
def test_front_matter_that_json_cannot_carry_is_refused(yaml_text: str, message: str) -> None:
    with pytest.raises(FrontMatterError, match=message):
        parse(f"---\n{yaml_text}\n---\n", "SKILL.md")


def test_rendered_front_matter_parses_back_to_the_same_fields() -> None:
    fields = {"name": "x", "description": "a: b # not a comment", "on": "yes", "version": "017",
              "metadata": {"io.example/key": ["1.0", None, True]}, "Odd key": "é"}

    assert parse(render(fields, "# Body\n"), "generated") == fields


def test_without_pyyaml_a_folder_skill_asks_for_the_skills_extra(tmp_path: Path) -> None:
    skill(tmp_path / "needs-yaml")
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "from flask import Flask\nfrom flask_mcp import MCP\n"
        "app = Flask('x'); app.config['MCP_BACKEND'] = 'memory://'\n"
        f"MCP(app).skills_from_directory({str(tmp_path)!r})\n"
    )

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)

    assert proc.returncode != 0
    assert "pip install 'flask-mcp[skills]'" in proc.stderr
