"""The daemon's read-only web page and JSON API over a state database the journal wrote (no Slurm needed):
the API against the admin commands' own answers, read-only and bounded, and `jobs`/`explain` through it."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tesserae_slurm.cli.main import main
from tesserae_slurm.daemon.operators import api
from tesserae_slurm.daemon.operators.readers import JOB_FIELDS
from tesserae_slurm.daemon.operators.web import serve
from tesserae_slurm.model import InputError
from tesserae_slurm.site.load import config_from_mapping

from .test_admin_commands import db  # noqa: F401 - the state database fixture: two real rounds through the journal

WEBUI = Path(__file__).resolve().parents[2] / "tesserae_slurm" / "daemon" / "operators" / "webui"


@pytest.fixture
def server(db) -> Iterator[str]:  # noqa: F811
    s = serve(db, "127.0.0.1:0")
    try:
        yield f"127.0.0.1:{s.server_address[1]}"
    finally:
        s.shutdown()
        s.server_close()


def request(addr: str, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    host, port = addr.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def get(addr: str, path: str) -> dict:
    status, _, body = request(addr, path)
    assert status == 200, body
    return json.loads(body)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def no_meta(text: str) -> dict:
    body = json.loads(text)
    body.pop("meta")
    return body


def test_cluster_map_is_where_jobs_run_now_and_the_plan_is_marked(server):
    """Round 2 decided to move the pair 11+12 to node2 and has not finished: the map shows them where
    they hold GPUs (node1:0-1), the move as planned; 14 finished and is off the map; the figures are
    round 1's, the newest finished round."""
    c = get(server, "/api/cluster")
    assert c["round"] == 2 and c["policy"] == "tesserae-t" and c["round_status"] == "applied"
    assert c["nodes"] == [{"name": "node1", "gpus": [["11", "12"], ["11", "12"], [], []]},
                          {"name": "node2", "gpus": [[], [], [], []]}]
    assert (c["gpus_total"], c["gpus_busy"]) == (8, 2) and c["packed"] == [["11", "12"]]
    assert c["planned"] == [{"job": "11", "kind": "move", "from": "node1:0-1", "to": "node2:0-1"},
                            {"job": "12", "kind": "move", "from": "node1:0-1", "to": "node2:0-1"}]
    assert c["migrated"] == ["11", "12"] and c["started"] == []
    assert c["jobs"]["11"] == {"name": "job|11", "user": "alice", "state": "RUNNING", "num_gpus": 2,
                               "strategy": "10,14", "gpus": "node1:0-1", "held": ""}
    assert set(c["jobs"]) == {"11", "12"}
    f = c["last_finished"]
    assert (f["round"], f["status"], f["gpus_busy"], f["gpus_total"], f["utilization"], f["duration_s"]) \
        == (1, "applied", 3, 4, 0.75, 1.0)


def _edit(path: Path, fn) -> None:  # noqa: ANN001 - fn gets a Journal on the database
    from tesserae_slurm.daemon.state.journal import Journal
    from tesserae_slurm.daemon.state.store import Store

    store = Store.open(path)
    try:
        fn(Journal(store))
    finally:
        store.close()


def test_finished_jobs_leave_the_map_and_held_jobs_say_held(db):  # noqa: F811
    """12 ended and 13 was held by an operator after round 2 decided: 12 is on neither the map nor the
    plan; 13 is listed with who held it; a job that holds GPUs the decision did not plan to stop shows
    where it is."""
    from tesserae_slurm.daemon.state.store import AdminRow, JobUpdate

    def change(store) -> None:  # noqa: ANN001
        store.update_jobs({"12": JobUpdate(state="COMPLETED", gpus="", nodes="", packed_with="")})
        store.store.add_admin_actions([AdminRow(time=3000.0, user="root", uid=0, command="hold", target="13",
                                          status="accepted")])
    _edit(db, change)
    from tesserae_slurm.daemon.state.store import Store

    store = Store.open(db, read_only=True)
    try:
        c = api.cluster(store)
    finally:
        store.close()
    assert c["nodes"][0] == {"name": "node1", "gpus": [["11"], ["11"], [], []]} and c["packed"] == []
    assert [p["job"] for p in c["planned"]] == ["11"] and "12" not in c["jobs"]
    assert c["jobs"]["13"]["held"].startswith("held by root with `tesserae hold`")


def test_page_comes_with_its_data(server):
    """The page is drawn from answers embedded in it (a screenshot taken at the load event, or a slow
    API, never sees it empty); they are the API's answers, with no way out of their script block."""
    status, _, page = request(server, "/")
    assert status == 200
    m = re.search(rb'<script type="application/json" id="initial">(.*?)</script>', page, re.S)
    assert m is not None and m.group(1).strip()
    data = json.loads(m.group(1))
    assert set(data) == {"cluster", "jobs", "rounds"}
    assert no_meta(json.dumps(data["cluster"])) == no_meta(json.dumps(get(server, "/api/cluster")))
    assert [r["job_id"] for r in data["jobs"]["jobs"]] == ["11", "12", "13"]
    assert len(data["rounds"]["rounds"]) == 2 and data["rounds"]["rounds"][0]["finished_at"] is not None
    assert b"</" not in m.group(1) and b"job|11" in m.group(1)


def test_the_page_reads_the_job_list_and_the_newest_decision_once(db):  # noqa: F811
    """The page embeds /api/cluster and /api/jobs, each built from every job row and the newest decision:
    one request reads each once (counted on the real SQLite engine), and the answers are the API's."""
    from sqlalchemy import event

    from tesserae_slurm.daemon.operators.web import answer, page
    from tesserae_slurm.daemon.state.store import Store

    store = Store.open(db, read_only=True)
    seen: list[str] = []

    def count(_conn, _cursor, statement, *_rest) -> None:  # noqa: ANN001
        seen.append(" ".join(statement.split()))

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        html = page(store)
        job_reads = [q for q in seen if re.search(r"\bFROM jobs\b", q)]
        # the newest decision (api._latest_decision's columns); /api/rounds and the figures read rounds apart
        decision_reads = [q for q in seen if q.startswith("SELECT rounds.round_id, rounds.status, rounds.policy, "
                                                          "rounds.started_at, rounds.decision_json FROM rounds")]
        assert len(job_reads) == 1 and len(decision_reads) == 1, seen
        block = re.search(rb'id="initial">(.*?)</script>', html, re.S)
        assert block is not None
        data = json.loads(block.group(1))
        for key, path in (("cluster", "/api/cluster"), ("jobs", "/api/jobs")):
            alone = answer(store, path, "")
            assert {**data[key], "meta": None} == {**json.loads(json.dumps(alone, default=str)), "meta": None}
        seen.clear()
        answer(store, "/api/jobs", "")  # an API request reads for itself
        assert len([q for q in seen if re.search(r"\bFROM jobs\b", q)]) == 1
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
        store.close()


def test_embedded_data_cannot_close_its_block(db):  # noqa: F811
    from tesserae_slurm.daemon.operators.web import page
    from tesserae_slurm.daemon.state.store import JobUpdate, Store

    _edit(db, lambda store: store.update_jobs({"13": JobUpdate(reason="</script><script>alert(1)</script>")}))
    store = Store.open(db, read_only=True)
    try:
        html = page(store)
    finally:
        store.close()
    block = re.search(rb'id="initial">(.*?)</script>', html, re.S)
    assert block is not None and b"alert" in block.group(1) and b"<" not in block.group(1)
    assert json.loads(block.group(1))["jobs"]["jobs"][2]["reason"] == "</script><script>alert(1)</script>"


def test_jobs_with_reason_and_rank_never_the_comment(server, db):  # noqa: F811
    j = get(server, "/api/jobs")
    by_id = {r["job_id"]: r for r in j["jobs"]}
    assert list(by_id) == ["11", "12", "13"] and j["round"] == 2 and not j["truncated"]
    assert by_id["13"]["reason"] == "Resources: needs 4 GPUs; 1 free" and by_id["13"]["rank"] == 3
    assert by_id["11"]["rank"] == 1 and by_id["11"]["packed_with"] == "12"
    assert tuple(by_id["11"]) == JOB_FIELDS  # the documented schema, nothing more (no Comment, no AdminComment)
    everything = get(server, "/api/jobs?all=1")
    assert [r["job_id"] for r in everything["jobs"]] == ["11", "12", "13", "14"]
    assert [r["job_id"] for r in get(server, "/api/jobs?states=PD")["jobs"]] == ["13"]
    for path in ("/api/jobs?all=1", "/api/jobs/11", "/api/cluster", "/api/rounds/last"):
        status, _, body = request(server, path)
        assert status == 200 and b"tesserae:v1:" not in body  # the submitted Comment stays in the database


def test_api_answers_are_the_admin_commands_answers(server, db, capsys):  # noqa: F811
    _, out, _ = cli(capsys, "explain", "11", "--db", str(db), "--json")
    assert no_meta(json.dumps(get(server, "/api/jobs/11"))) == no_meta(out)
    _, out, _ = cli(capsys, "round", "show", "last", "--db", str(db), "--json")
    assert no_meta(json.dumps(get(server, "/api/rounds/last"))) == no_meta(out)
    _, out, _ = cli(capsys, "rounds", "--db", str(db), "--json")
    listed = get(server, "/api/rounds")["rounds"]
    assert [{k: v for k, v in r.items() if k in json.loads(out)["rounds"][0]} for r in listed] \
        == json.loads(out)["rounds"]
    assert [(r["round"], r["utilization"], r["gpus_busy"]) for r in listed] == [(1, 0.75, 3), (2, 0.25, 2)]


def test_read_only_and_errors_are_json_lines(server):
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, body = request(server, "/api/jobs", method)
        assert status == 405 and headers["Allow"] == "GET, HEAD" and "read-only" in json.loads(body)["error"]
    status, _, body = request(server, "/api/jobs", "HEAD")
    assert status == 200 and body == b""
    for path, code, words in (("/api/jobs/99", 404, "not in the state database"),
                              ("/api/jobs/x1", 400, "must be a number"),
                              ("/api/rounds?n=0", 400, "n must be in 1..500"),
                              ("/api/rounds/7", 404, "no round 7"),
                              ("/api/jobs?states=BOGUS", 400, "unknown job state"),
                              ("/api/nope", 404, "no such endpoint"),
                              ("/etc/passwd", 404, "no such page"),
                              ("/static/../web.py", 404, "no such page"),
                              ("/api/jobs?x=" + "a" * 3000, 414, "longer than")):
        status, headers, body = request(server, path)
        assert status == code and headers["Content-Type"] == "application/json", (path, status)
        assert words in json.loads(body)["error"], (path, body)


def test_answers_are_bounded(server, monkeypatch):
    monkeypatch.setattr(api, "MAX_JOBS", 2)
    j = get(server, "/api/jobs?all=1")
    assert j["truncated"] and [r["job_id"] for r in j["jobs"]] == ["12", "13"]  # the newest, unfinished kept
    from tesserae_slurm.daemon.operators import web
    monkeypatch.setattr(web, "MAX_BODY", 100)
    status, _, body = request(server, "/api/jobs")
    assert status == 507 and "narrow the query" in json.loads(body)["error"]


def test_page_ships_every_asset_and_loads_nothing_from_outside(server):
    status, headers, page = request(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    refs = re.findall(rb'(?:src|href)="([^"]+)"', page)
    assert b"/static/app.js" in refs and b"/static/style.css" in refs
    assert all(r.startswith(b"/") for r in refs), refs
    for ref in refs:
        if ref.startswith(b"/static/"):
            status, _, body = request(server, ref.decode())
            assert status == 200 and body == (WEBUI / ref.decode().rsplit("/", 1)[1]).read_bytes()
    js = (WEBUI / "app.js").read_text()
    assert re.findall(r"fetch\(|getJson\(\"[^/]|https?://", js) \
        == ["fetch(", "http://"] and "http://www.w3.org/2000/svg" in js  # the SVG namespace, not a request
    assert "innerHTML" not in js  # API strings (job names are user input) go in as text only
    assert "url(" not in (WEBUI / "style.css").read_text()


def test_jobs_and_explain_through_the_api_match_the_database(server, db, capsys):  # noqa: F811
    for argv in (["jobs"], ["jobs", "-a", "--json"], ["jobs", "-t", "PD,R", "-l"], ["jobs", "-u", "alice", "-p"],
                 ["jobs", "-j", "13", "-o", "%i %R"], ["explain", "11"], ["explain", "13", "--json"]):
        code_db, out_db, _ = cli(capsys, *argv, "--db", str(db))
        code_api, out_api, err = cli(capsys, *argv, "--api", f"http://{server}")
        assert (code_api, err) == (0, "") and code_db == 0
        if "--json" in argv:
            assert no_meta(out_api) == no_meta(out_db), argv
        else:
            assert out_api == out_db, argv
    code, _, err = cli(capsys, "explain", "99", "--api", server)
    assert code == 2 and err.strip().endswith("is not in the state database (not submitted with tsbatch, or not "
                                              "seen by the daemon yet)") and len(err.splitlines()) == 1
    code, _, err = cli(capsys, "explain", "11", "--api", "127.0.0.1:1")
    assert code == 2 and "cannot reach the daemon's API at http://127.0.0.1:1" in err
    code, _, err = cli(capsys, "jobs", "--api", "ftp://x")
    assert code == 2 and "expected http://HOST:PORT" in err


@pytest.mark.parametrize(("listen", "words"), [
    ("localhost", "http.listen must be HOST:PORT"), ("127.0.0.1:99999", "port 0-65535"), (":80", "HOST:PORT"),
])
def test_http_listen_is_validated(listen, words):
    with pytest.raises(InputError, match=words):
        config_from_mapping({"http": {"listen": listen}}, check_policy=False)


def test_http_defaults_to_localhost_and_may_be_off():
    assert config_from_mapping({}, check_policy=False).http.listen == "127.0.0.1:9479"
    assert config_from_mapping({"http": {"listen": ""}}, check_policy=False).http.listen == ""
    with pytest.raises(InputError, match="must differ"):
        config_from_mapping({"http": {"listen": "127.0.0.1:9478"}}, check_policy=False)


def test_a_user_who_cannot_read_the_database_gets_the_api(server, db):  # noqa: F811
    """The real case: another user (nobody, when the tests run as root; else the database made mode 000),
    no --api: `tesserae jobs` and `explain` find the API through the config's http.listen."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tesserae-web-") as shared:
        os.chmod(shared, 0o755)  # the config is readable by everyone, the database is not
        cfg, off, gone = Path(shared) / "t.yaml", Path(shared) / "off.yaml", Path(shared) / "gone.yaml"
        cfg.write_text(yaml.safe_dump({"state": {"database": str(db)}, "http": {"listen": server}}))
        off.write_text(yaml.safe_dump({"state": {"database": str(db)}, "http": {"listen": ""}}))
        gone.write_text(yaml.safe_dump({"state": {"database": str(db)}, "http": {"listen": "127.0.0.1:1"}}))
        exe = [sys.executable, "-m", "tesserae_slurm.cli.main"]
        as_user: list[str] = []
        if os.geteuid() == 0:
            as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            os.chmod(db.parent, 0o700)
        else:
            os.chmod(db, 0)
        env = {k: v for k, v in os.environ.items() if k not in ("TESSERAE_DB", "TESSERAE_CONFIG")}
        env["HOME"] = shared

        def tesserae(*argv: str, user: bool = True) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*(as_user if user else []), *exe, *argv], capture_output=True, text=True,
                                  timeout=60, env=env, cwd=shared, check=False)

        for argv in (["jobs", "-l"], ["explain", "13"]):
            proc = tesserae(*argv, "--config", str(cfg))
            assert proc.returncode == 0, proc.stderr
            assert "Resources: needs 4 GPUs; 1 free" in proc.stdout
            if as_user:
                assert proc.stdout == tesserae(*argv, "--db", str(db), user=False).stdout
        for argv in (["rounds"], ["round", "show", "last"], ["rounds", "--json"], ["actions", "--all"]):
            proc = tesserae(*argv, "--config", str(cfg))
            assert proc.returncode == 0 and proc.stdout, proc.stderr
            if as_user:  # the API's answer is the database's, whoever reads it
                direct = tesserae(*argv, "--db", str(db), user=False).stdout
                assert re.sub(r'"generated_at": "[^"]*"', "", proc.stdout) == \
                    re.sub(r'"generated_at": "[^"]*"', "", direct), argv
        denied = tesserae("jobs", "--config", str(off))
        assert denied.returncode == 2 and len(denied.stderr.splitlines()) == 1, denied.stderr
        assert "cannot read the state database" in denied.stderr and "--api URL" in denied.stderr
        down = tesserae("explain", "11", "--config", str(gone))
        assert down.returncode == 2 and len(down.stderr.splitlines()) == 1, down.stderr
        assert "cannot reach the daemon's API at http://127.0.0.1:1" in down.stderr and "not readable" in down.stderr


def test_many_readers_at_once(server):
    """ThreadingHTTPServer on one read-only engine: parallel pollers all get whole answers."""
    from concurrent.futures import ThreadPoolExecutor

    paths = ["/api/jobs", "/api/cluster", "/api/rounds", "/api/jobs/11", "/"] * 8
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda p: request(server, p), paths))
    assert [status for status, _, _ in results] == [200] * len(paths)
    assert len({json.dumps(no_meta(body)) for _, _, body in results[0::5]}) == 1  # /api/jobs: the same each time
