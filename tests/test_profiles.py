import re
import shutil

import pytest

from i2o.compute import profiles
from i2o.compute.profiles import ParameterError

SCHEMA = {
    "n": {"type": "int", "min": 1},
    "eta": {"type": "float", "min": 0.0, "max": 1.0},
    "arm": {"type": "str", "choices": ["ift", "unrolled"]},
    "test_n": {"type": "int_list", "min": 1},
}


@pytest.fixture
def manifest(monkeypatch):
    fake = {"toy": {"notebook": "book/toy.ipynb", "title": "Toy", "outputs": ["toy"],
                    "parameters": SCHEMA,
                    "profiles": {p: {"n": 3, "eta": 0.5, "arm": "ift", "test_n": [1, 2]}
                                 for p in profiles.PROFILES}}}
    monkeypatch.setattr(profiles, "load_manifest", lambda: fake)
    return fake


def test_profile_values_and_overrides(manifest):
    params = profiles.resolve("toy", "paper", n=7, eta=None)
    assert params["n"] == 7 and params["eta"] == 0.5 and params.profile == "paper"
    assert params.overridden == ("n",)
    assert isinstance(profiles.resolve("toy", "quick", eta=1)["eta"], float)
    with pytest.raises(AttributeError):  # parameters are read one way: params["n"]
        params.n  # noqa: B018


@pytest.mark.parametrize("given, message", [
    ({"n": -3}, "parameter 'n' of figure 'toy' must be an integer ≥ 1; got -3"),
    ({"n": "ten"}, "parameter 'n' of figure 'toy' must be an integer ≥ 1; got 'ten'"),
    ({"n": 2.5}, "must be an integer"),
    ({"n": True}, "must be an integer"),
    ({"eta": 2.0}, "must be a number ≥ 0.0 and ≤ 1.0"),
    ({"arm": "adjoint"}, "must be one of 'ift', 'unrolled'"),
    ({"test_n": [1, 0]}, "list of integers with every element ≥ 1"),
    ({"test_n": []}, "list of integers"),
    ({"nn": 3}, "unknown parameter(s) 'nn' for figure 'toy'; allowed: profile, n, eta"),
])
def test_bad_values_name_the_parameter(manifest, given, message):
    with pytest.raises(ParameterError) as error:
        profiles.resolve("toy", "quick", **given)
    assert message in str(error.value)


def test_unknown_profile_and_figure(manifest):
    with pytest.raises(ParameterError, match="parameter 'profile' must be one of 'smoke'"):
        profiles.resolve("toy", "fast")
    with pytest.raises(ParameterError, match="unknown figure 'nope'"):
        profiles.resolve("nope")


def test_namespace_reads_papermill_variables(manifest):
    namespace = {"profile": "smoke", "n": None, "eta": 0.25, "arm": None, "test_n": None,
                 "In": [], "get_ipython": print, "np": pytest, "_": 1}
    params = profiles.resolve_namespace("toy", namespace)
    assert params.profile == "smoke" and params["eta"] == 0.25 and params["n"] == 3
    with pytest.raises(ParameterError, match="unknown parameter"):
        profiles.resolve_namespace("toy", {**namespace, "n_seed": 4})


def test_real_manifest_profiles_are_valid():
    for figure in profiles.figures():
        for profile in profiles.PROFILES:
            profiles.resolve(figure, profile)


def test_show_prints_profile_and_sizes(manifest, capsys):
    profiles.show(profiles.resolve("toy", "smoke", n=5))
    out = capsys.readouterr().out
    assert "profile 'smoke'" in out and "n = 5  (overridden)" in out


def test_an_empty_list_only_where_the_schema_allows_it():
    from i2o.compute.profiles import ParameterError, validate_value

    schema = {"type": "int_list", "min": 0}
    with pytest.raises(ParameterError, match="a list of integers with every element ≥ 0"):
        validate_value("meta", "seeds", [], schema)
    assert validate_value("meta", "seeds", [], {**schema, "empty": True}) == []
    with pytest.raises(ParameterError, match=r"\(or an empty list\)"):
        validate_value("meta", "seeds", [-1], {**schema, "empty": True})


def _chapter(chapters, folder: str, text: str) -> None:
    (chapters / folder).mkdir(parents=True, exist_ok=True)
    (chapters / folder / profiles.MANIFEST_NAME).write_text(text)


def test_the_manifest_is_read_from_each_chapters_package_in_the_books_order(tmp_path):
    """Each chapter's ``chapter.yaml`` is its manifest entry; the chapters are sorted by their
    ``position``; a file naming another package than its folder, a figure twice, two figures or
    no position is refused, naming the file."""
    import yaml

    real = yaml.safe_load((profiles.CHAPTERS_DIR / "affine" / "chapter.yaml").read_text())
    entry = real["affine"]

    def write(root, folder, figure, position, package=None):
        _chapter(root, folder, yaml.safe_dump({figure: {
            **entry, "position": position, "package": package or f"i2o.chapters.{folder}"}}))

    write(tmp_path, "zeta", "zeta", 1)
    write(tmp_path, "alpha", "alpha", 2)
    assert list(profiles._load(str(tmp_path))) == ["zeta", "alpha"]
    assert list(profiles.load_manifest()) == profiles.figures()
    assert profiles.figures()[:2] == ["affine", "stability"]
    cases = {
        "wrong": (lambda root: write(root, "wrong", "wrong", 3, package="i2o.chapters.other"),
                  "wrong/chapter.yaml: package is 'i2o.chapters.other', not the folder's"),
        "twice": (lambda root: write(root, "twice", "alpha", 3),
                  "twice/chapter.yaml: figure 'alpha' is also in alpha/chapter.yaml"),
        "two": (lambda root: _chapter(root, "two", "a: {}\nb: {}\n"),
                "two/chapter.yaml: a chapter's manifest holds one figure; found ['a', 'b']"),
        "unplaced": (lambda root: _chapter(root, "unplaced", yaml.safe_dump({"unplaced": {
            k: v for k, v in entry.items() if k != "position"}})),
            "unplaced/chapter.yaml: figure 'unplaced' has no 'position'"),
    }
    for name, (make, message) in cases.items():
        root = tmp_path / f"case-{name}"
        shutil.copytree(tmp_path / "alpha", root / "alpha")
        make(root)
        with pytest.raises(ValueError, match=re.escape(message)):
            profiles._load(str(root))
