"""3-D playback pages (app.viewer): what they hold, that solve/simulate write them, and
that they render in a real headless browser (Chromium through Playwright)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import problems
from dynamics import ModelBuilder, Simulator
from app.cli import main
from app.viewer import (MAX_FRAMES, decimate, frame_indices, read_scene, scene_array, scene_data,
                            write_scene)

CHROMIUM = "/usr/bin/chromium"


def falling_box_simulator() -> Simulator:
    """A 1 kg box (0.3 x 0.2 x 0.1 m) on a free-flyer over the ground z = 0."""
    b = ModelBuilder("falling-box")
    j = b.add_joint("free", name="root")
    b.add_body(j, mass=1.0, box=(0.3, 0.2, 0.1))
    model, geom = b.build()
    return Simulator(model, geometry=geom, dt=2e-3, ground=0.0)


@pytest.fixture(scope="module")
def falling_box():
    """The box dropped from 0.4 m, tilted: 0.4 s of fall, impact, rest; its controls (none)."""
    sim = falling_box_simulator()
    x0 = sim.neutral_state()
    x0[:3] = (0.0, 0.0, 0.4)
    x0[3:7] = (0.0, 0.0871557, 0.0, 0.9961947)  # 10 degrees about y: one edge lands first
    us = np.zeros((300, sim.nu))
    return sim, sim.rollout(x0, us), us


def test_frame_indices_keep_the_ends_and_the_cap():
    assert np.array_equal(frame_indices(10), np.arange(10))
    idx = frame_indices(1001, 50)
    assert len(idx) == 50 and idx[0] == 0 and idx[-1] == 1000 and np.all(np.diff(idx) > 0)
    with pytest.raises(ValueError, match="max_frames"):
        frame_indices(10, 1)


def test_decimate_caps_the_triangles_and_keeps_the_shape():
    from scipy.spatial import ConvexHull

    rng = np.random.default_rng(0)
    P = rng.standard_normal((3000, 3))
    P /= np.linalg.norm(P, axis=1, keepdims=True)  # points on the unit sphere: ~6000 hull triangles
    F = ConvexHull(P).simplices
    V2, F2 = decimate(P, F, 500)
    assert len(F) > 5000 and 50 < len(F2) <= 500
    assert F2.max() < len(V2) and F2.min() >= 0
    r = np.linalg.norm(V2, axis=1)
    assert r.max() <= 1 + 1e-9 and r.min() > 0.8  # cluster means stay near the sphere
    V3, F3 = decimate(P, F, 10**6)
    assert len(F3) == len(F)  # under the cap: unchanged


def test_scene_holds_frames_geometry_and_contacts(falling_box, tmp_path):
    sim, xs, us = falling_box
    info = write_scene(sim, xs, tmp_path / "scene.html", us=us, title="box <drop>")
    scene = read_scene(tmp_path / "scene.html")
    assert info.frames == scene["frames"] == MAX_FRAMES and info.bytes == os.path.getsize(tmp_path / "scene.html")
    assert scene["frame_indices"][0] == 0 and scene["frame_indices"][-1] == 300
    kinds = [s["kind"] for s in scene["shapes"]]
    assert kinds == ["box", "plane"] and info.geometries == 2 and scene["n_moving"] == 1
    assert scene["shapes"][0]["size"] == pytest.approx([0.3, 0.2, 0.1])
    P = scene_array(scene, "placements")
    np.testing.assert_allclose(P[:, 0, :3], xs[scene["frame_indices"], :3], atol=1e-6)  # the box's origin
    np.testing.assert_allclose(P[:, 0, 3:], xs[scene["frame_indices"], 3:7], atol=1e-6)  # quaternion x y z w
    t = scene_array(scene, "times")
    np.testing.assert_allclose(t, np.asarray(scene["frame_indices"]) * sim.dt, rtol=1e-6)
    # in flight no contact; resting on the ground (the step from state 299): forces that carry the
    # weight; the last state has no step after it
    counts = np.asarray(scene["contact_counts"])
    assert counts[:50].sum() == 0 and counts[-2] >= 3 and counts[-1] == 0
    F = scene_array(scene, "contact_forces")
    assert len(F) == counts.sum() and info.contact_frames == np.count_nonzero(counts)
    rest = F[-counts[-2]:]
    assert np.all(rest[:, 2] > 0) and np.sum(rest[:, 2]) == pytest.approx(9.81, rel=0.05)
    assert np.all(np.abs(scene_array(scene, "contact_points")[-counts[-2]:, 2]) < 0.01)
    assert b"<drop>" not in (tmp_path / "scene.html").read_bytes()  # the title is escaped


def test_scene_draws_the_finite_part_and_refuses_bad_input(falling_box):
    sim, xs, _ = falling_box
    bad = xs[:40].copy()
    bad[25:] = np.nan
    scene, info = scene_data(sim, bad)
    assert scene["frames"] == 25 and info.contact_frames == 0  # no controls: no contacts
    with pytest.raises(ValueError, match="no finite state"):
        scene_data(sim, np.full((3, sim.nx), np.nan))
    with pytest.raises(ValueError, match="xs must be"):
        scene_data(sim, np.zeros((3, 2)))


def test_registered_scenes_draw_their_static_objects():
    for name, kinds in (("catapult", {"box"}), ("go1-hold", {"box", "cylinder", "sphere", "plane"})):
        ocp = problems.load(name, horizon=5)
        scene, info = scene_data(ocp.dynamics, ocp.rollout(ocp.us_init), us=ocp.us_init)
        assert {s["kind"] for s in scene["shapes"]} == kinds and not info.skipped
        assert any(s["static"] for s in scene["shapes"])  # the catapult's floor, Go1's ground
        assert scene["planar"] == (name == "catapult")


def test_solve_and_simulate_write_scene_html(tmp_path):
    assert main(["solve", "pendulum", "--max-iter", "2", "--horizon", "30", "--out", str(tmp_path)]) == 0
    scene = read_scene(tmp_path / "pendulum" / "ddp" / "scene.html")
    assert scene["frames"] == 31 and len(scene["shapes"]) == 1 and scene["title"].startswith("pendulum: ddp")
    assert main(["simulate", "double-cartpole", "--steps", "20", "--out", str(tmp_path)]) == 0
    scene = read_scene(tmp_path / "double-cartpole" / "scene.html")
    assert scene["frames"] == 21 and len(scene["shapes"]) == 3
    assert main(["simulate", "cartpole", "--steps", "5", "--no-scene", "--out", str(tmp_path)]) == 0
    assert not (tmp_path / "cartpole" / "scene.html").exists()


def test_catapult_design_writes_the_scene_of_its_design(tmp_path):
    """The co-design's dynamics (a design knot, then the catapult at that design) is no simulator itself:
    solve and simulate wrote no scene.html and said nothing. The page plays the catapult at the design
    of the answer, one frame per physical step."""
    assert main(["solve", "catapult-design", "--method", "ddp", "--max-iter", "1", "--horizon", "30",
                 "--no-animation", "--out", str(tmp_path)]) in (0, 1)
    folder = tmp_path / "catapult-design" / "ddp"
    scene = read_scene(folder / "scene.html")
    sol = np.load(folder / "solution.npz")
    assert len(sol["xs"]) == 32 and scene["frames"] == 31 and scene["planar"]
    P = scene_array(scene, "placements")  # the projectile where the states (after the design knot) put it
    np.testing.assert_allclose(P[:, 0, :2], sol["xs"][1:][scene["frame_indices"], :2], atol=1e-6)
    assert main(["view", str(folder), "--out", str(tmp_path / "viewed.html")]) == 0
    assert read_scene(tmp_path / "viewed.html")["frames"] == 31
    assert main(["simulate", "catapult-design", "--steps", "20", "--out", str(tmp_path)]) == 0
    assert read_scene(tmp_path / "catapult-design" / "scene.html")["frames"] == 20


# -- in a real browser --------------------------------------------------------------------------
def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; see README, 3-D playback)")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; see README, 3-D playback)")
    return sync_playwright


@pytest.fixture(scope="module")
def page_of(falling_box, tmp_path_factory):
    """Open a scene in headless Chromium; yields ``open(path) -> (page, console messages)``."""
    sync_playwright = _browser_or_skip()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader"])

        def open_page(path, ready="body[data-ready='1']"):
            page = browser.new_page(viewport={"width": 800, "height": 560})
            messages = []
            page.on("console", lambda m: messages.append((m.type, m.text)))
            page.on("pageerror", lambda e: messages.append(("error", str(e))))
            page.goto(path.as_uri())
            page.wait_for_selector(ready, timeout=30_000)
            return page, messages

        yield open_page
        browser.close()


def _canvas_pixels(page) -> np.ndarray:
    """The WebGL canvas' own pixels (toDataURL: no overlapping HTML), (h, w, 3) ints."""
    import base64
    import io

    from PIL import Image

    url = page.evaluate("document.querySelector('#view canvas').toDataURL('image/png')")
    png = base64.b64decode(url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)


def test_page_renders_and_plays_in_chromium(page_of, falling_box, tmp_path):
    sim, xs, us = falling_box
    path = tmp_path / "scene.html"
    write_scene(sim, xs, path, us=us, title="falling box")
    page, messages = page_of(path)
    assert page.locator("#view canvas").count() == 1
    first = _canvas_pixels(page)
    colors, counts = np.unique(first.reshape(-1, 3), axis=0, return_counts=True)
    drawn = 1 - counts.max() / counts.sum()  # pixels not of the most common colour
    assert drawn > 0.05 and len(colors) > 100, f"a blank canvas: {len(colors)} colours, {drawn:.1%} drawn"
    assert page.locator("#time").input_value() == "0"
    page.select_option("#speed", "0.25")
    page.click("#play")
    page.wait_for_timeout(800)
    assert int(page.locator("#time").input_value()) > 0, "play did not advance the slider"
    page.click("#play")  # pause
    assert page.locator("#play").inner_text() == "play"
    page.evaluate(f"window.sceneViewer.setFrame({MAX_FRAMES - 1})")
    page.wait_for_timeout(200)
    last = _canvas_pixels(page)
    assert np.abs(last - first).max(axis=2).astype(bool).mean() > 0.002, "the frame did not change the picture"
    errors = [m for m in messages if m[0] == "error"]
    assert not errors, errors
    page.close()


def test_page_reports_corrupt_data_instead_of_a_blank_canvas(page_of, falling_box, tmp_path):
    sim, xs, _ = falling_box
    path = tmp_path / "scene.html"
    write_scene(sim, xs[:10], path)
    html = path.read_text()
    start = html.index('id="scene-data">') + len('id="scene-data">')
    path.write_text(html[:start] + "AAAA" + html[start + 4:])
    page, messages = page_of(path, ready="#error:not(:empty)")
    assert "could not show the scene" in page.locator("#error").inner_text()
    assert page.evaluate("document.body.dataset.ready") is None
    assert any(kind == "error" for kind, _ in messages)
    page.close()


# -- trajopt view DIR ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def solved_catapult(tmp_path_factory):
    """A short catapult solve with a non-default target and contact model (so the page can only be right
    if view rebuilds the problem from the options recorded in summary.json); its page moved aside."""
    out = tmp_path_factory.mktemp("view")
    assert main(["solve", "catapult", "--method", "ddp", "--max-iter", "1", "--horizon", "60", "--contact", "ncp",
                 "--option", "target=(2.6, 2.0)", "--no-animation", "--out", str(out)]) in (0, 1)
    folder = out / "catapult" / "ddp"
    (folder / "scene.html").rename(out / "written-by-solve.html")
    return folder, out / "written-by-solve.html"


def test_view_rebuilds_scene_html_from_a_result_folder(solved_catapult, capsys):
    folder, original = solved_catapult
    assert main(["view", str(folder)]) == 0
    page = folder / "scene.html"
    assert page.is_file() and f"wrote {page}" in capsys.readouterr().out
    html = page.read_text()
    assert "http://" not in html and "https://" not in html and "<script src" not in html  # self-contained
    scene = read_scene(page)
    sol = np.load(folder / "solution.npz")
    assert scene["frames"] == len(sol["xs"]) == 61 and scene["planar"]
    assert scene["target"] == pytest.approx([2.6, 2.0, 0.0])  # the recorded option, not the default (2.2, 2.2)
    # the trajectory: the projectile (the first moving body) is where the solution's states put it
    P = scene_array(scene, "placements")
    np.testing.assert_allclose(P[:, 0, :2], sol["xs"][scene["frame_indices"], :2], atol=1e-6)
    assert scene == read_scene(original)  # the same page as the solve wrote
    # a path to the npz works too, and --out puts the page elsewhere
    assert main(["view", str(folder / "solution.npz"), "--out", str(folder.parent / "other.html")]) == 0
    assert read_scene(folder.parent / "other.html") == scene


def _result(folder, summary, **arrays):
    import json

    folder.mkdir(parents=True, exist_ok=True)
    if arrays:
        np.savez(folder / "solution.npz", **arrays)
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_view_names_what_is_wrong_with_the_folder(tmp_path, capsys, solved_catapult):
    cases = {
        "no such folder": tmp_path / "missing",
        "no solution.npz there": _result(tmp_path / "empty", {"problem": "pendulum"}),
        "not a NumPy .npz file": tmp_path / "text",
        "arrays ['a', 'b'], not a trajectory": _result(tmp_path / "foreign", {"problem": "pendulum"},
                                                       a=np.zeros(3), b=np.ones(2)),
        "an inverse problem's answer": _result(tmp_path / "inverse", {"problem": "cube-throw"}, z=np.zeros(6),
                                               iterates=np.zeros((3, 6))),
        "not registered": _result(tmp_path / "unknown", {"problem": "no-such-problem"}, xs=np.zeros((3, 2)),
                                  us=np.zeros((2, 1)), dt=0.01),
        "has nx = 2, nu = 1: not its result": _result(tmp_path / "mismatch", {"problem": "pendulum"},
                                                     **dict(np.load(solved_catapult[0] / "solution.npz"))),
        "no problem name": _result(tmp_path / "nosummary", {"status": "converged"}, xs=np.zeros((3, 2)),
                                   us=np.zeros((2, 1))),
    }
    _result(tmp_path / "text", {"problem": "pendulum"})
    (tmp_path / "text" / "solution.npz").write_text("not a zip")
    for message, folder in cases.items():
        assert main(["view", str(folder)]) == 2, message
        err = capsys.readouterr().err
        assert message in err and err.startswith("trajopt: error:"), (message, err)
        assert not (folder / "scene.html").exists()


def test_view_refuses_a_trajectory_that_does_not_match_its_summary(tmp_path, capsys, solved_catapult):
    """A jump-worm solution.npz beside a catapult summary.json (both planar, 10 states, 3 controls) used to
    give a wrong page and exit 0: its length must be the summary's horizon, its start the problem's."""
    import json

    import problems

    summary = json.loads((solved_catapult[0] / "summary.json").read_text())
    worm = problems.load("jump-worm", horizon=summary["horizon"])
    us = np.zeros((worm.horizon, worm.nu))
    xs = worm.rollout(us)
    started = _result(tmp_path / "worm", summary, xs=xs, us=us, dt=0.001)
    longer = _result(tmp_path / "longer", {**summary, "horizon": 500},
                     **dict(np.load(solved_catapult[0] / "solution.npz")))
    for message, folder in (("does not start at 'catapult'", started), ("of 60 steps, but summary.json says horizon 500", longer)):
        assert main(["view", str(folder)]) == 2, message
        err = capsys.readouterr().err
        assert message in err and "not its result" in err, err
        assert not (folder / "scene.html").exists()


def test_a_viewed_page_renders_in_chromium(page_of, solved_catapult):
    folder, _ = solved_catapult
    assert main(["view", str(folder)]) == 0
    page, messages = page_of(folder / "scene.html")
    assert page.locator("#view canvas").count() == 1
    assert not [m for m in messages if m[0] == "error"]
    page.close()


def test_the_contacts_are_resimulated_in_a_workspace_of_the_viewers_own(falling_box):
    """scene_data stepped the simulator's default workspace to find each frame's contacts, overwriting
    what a caller's last step left there (``sim.contacts``)."""
    _, xs, us = falling_box
    sim = falling_box_simulator()  # its default workspace has taken no step: no contacts reported
    scene, info = scene_data(sim, xs, us=us)
    assert info.contact_frames > 0 and sum(scene["contact_counts"]) > 0  # contacts were drawn...
    assert len(sim.contacts) == 0  # ...without touching the default workspace
    assert info.contact_warning is None and scene["contact_warning"] is None


def test_a_simulation_error_while_drawing_contacts_is_reported_naming_the_step(falling_box, tmp_path, capsys,
                                                                                monkeypatch):
    """After a SimulationError in the re-simulation the page silently drew no more contacts."""
    from app.cli import write_scene_file
    from dynamics import SimulationError

    _, xs, us = falling_box
    sim = falling_box_simulator()
    step = sim.step
    k = int(frame_indices(len(xs))[100])  # a drawn frame's step

    def failing_step(x, u, **kw):
        if np.array_equal(x, xs[k]):
            raise SimulationError("the contact solve diverged")
        return step(x, u, **kw)

    monkeypatch.setattr(sim, "step", failing_step)
    scene, info = scene_data(sim, xs, us=us)
    assert f"step {k}" in info.contact_warning and "diverged" in info.contact_warning
    assert scene["contact_warning"] == info.contact_warning
    assert sum(scene["contact_counts"][scene["frame_indices"].index(k):]) == 0  # none drawn from there
    assert write_scene_file(sim, xs, us, str(tmp_path), title="box")
    err = capsys.readouterr().err
    assert "warning:" in err and f"step {k}" in err, err
    assert read_scene(tmp_path / "scene.html")["contact_warning"] == info.contact_warning
