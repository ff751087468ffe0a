#!/usr/bin/env bash
# `ddp_train report RUN_DIR`: a 2-rank run's page renders in headless Chromium (a screenshot is
# taken and must show something), and its DOM holds the four curves, the confusion matrix equal to
# metrics.jsonl's (every test sample counted once) and the image grid, whose captions are what
# `ddp_train predict` says of the very same pictures (taken back out of the page). The page is
# self-contained (no script, nothing fetched). A directory that is not a run is a clear error that
# writes nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_data.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || skip "no chromium to render the page (apt-get install chromium)"
pick_comparison_data 2000 300

run="$WORK/run"
mpirun_local -np 2 "$BIN" --config "$SRC/configs/cifar.toml" "${DATA[@]}" \
  --data.train_limit 2000 --data.test_limit 300 --train.batch_size 50 --train.epochs 3 \
  --runtime.threads 1 --run-dir "$run" > "$WORK/train.log" 2>&1 \
  || { cat "$WORK/train.log"; fail "the training run failed"; }
"$BIN" report "$run" --images 24 > "$WORK/report.log" 2>&1 \
  || { cat "$WORK/report.log"; fail "report failed"; }
grep -q "report: $run/report.html (3 epoch(s), a confusion matrix, 24 test image(s))" \
  "$WORK/report.log" || { cat "$WORK/report.log"; fail "report did not say what it wrote"; }
page="$run/report.html"
[ -s "$page" ] || fail "no report.html"
! grep -qi "<script" "$page" || fail "the page has a script"
! grep -Eo '(src|href)="[^"]*"' "$page" | grep -v '"data:image/png;base64,' | grep -q . \
  || fail "the page loads something from outside: $(grep -Eo '(src|href)="[^"]{0,40}' "$page" | grep -v data: | head -3)"

# Render: a DOM dump and a screenshot, from files, with no network.
chrome=("$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage
        --no-first-run --user-data-dir="$WORK/chrome" --window-size=1280,2400)
timeout 120 "${chrome[@]}" --dump-dom "file://$page" > "$WORK/dom.html" 2> "$WORK/chrome.log" \
  || { tail -20 "$WORK/chrome.log"; fail "chromium could not render the page"; }
timeout 120 "${chrome[@]}" --screenshot="$WORK/shot.png" "file://$page" >> "$WORK/chrome.log" 2>&1 \
  || { tail -20 "$WORK/chrome.log"; fail "chromium could not take a screenshot"; }
[ "${DDP_KEEP_REPORT_SHOT:-}" ] && cp "$WORK/shot.png" "$DDP_KEEP_REPORT_SHOT"

mkdir -p "$WORK/grid"
"$PY" - "$WORK/dom.html" "$run/metrics.jsonl" "$WORK/shot.png" "$WORK/grid" << 'EOF' \
  || fail "the rendered page is not what the run recorded"
import base64, html.parser, io, json, sys
from PIL import Image
dom_file, metrics_file, shot_file, grid_dir = sys.argv[1:5]

class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.charts, self.cells, self.figures = [], {}, [], []
        self.in_td = self.in_pred = self.in_truth = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure" and "chart" in a.get("class", ""):
            self.chart = a["id"]; self.charts[self.chart] = []
        if tag == "path" and a.get("class") == "line":
            self.charts[self.chart].append((a["data-series"], a["d"].count("L") + 1))
        if tag == "tr": self.cells.append([])
        if tag == "td" and a.get("class") in ("hit", "miss"): self.in_td = True
        if tag == "figure" and "sample" in a.get("class", ""):
            self.figures.append({"wrong": "wrong" in a["class"], "pred": "", "truth": None})
        if tag == "img" and self.figures and self.figures[-1].get("src") is None:
            self.figures[-1]["src"] = a["src"]
        if tag == "span": self.span = a.get("class")
    def handle_endtag(self, tag):
        if tag == "td": self.in_td = False
        if tag == "span": self.span = None
    def handle_data(self, data):
        if self.in_td: self.cells[-1].append(int(data))
        if getattr(self, "span", None) == "pred": self.figures[-1]["pred"] += data
        if getattr(self, "span", None) == "truth": self.figures[-1]["truth"] = data

d = Dom(); d.feed(open(dom_file).read())
rows = [json.loads(l) for l in open(metrics_file) if '"epoch"' in l and '"summary"' not in l]
assert len(rows) == 3, rows
for chart, series in (("loss-chart", {"train", "test"}), ("accuracy-chart", {"train", "test"}),
                      ("lr-chart", {"lr"}), ("speed-chart", {"all ranks", "rank 0", "rank 1"})):
    got = dict(d.charts.get(chart, []))
    assert set(got) == series, (chart, got)
    assert all(n == 3 for n in got.values()), (chart, got)  # a point per epoch
matrix = [r for r in d.cells if r]
assert matrix == rows[-1]["confusion"], (matrix, rows[-1]["confusion"])
assert sum(map(sum, matrix)) == rows[-1]["test_samples"] == 300
names = [c["class"] for c in rows[-1]["per_class"]]
assert len(d.figures) == 24, len(d.figures)
with open(grid_dir + "/captions.txt", "w") as out:
    for i, f in enumerate(d.figures):
        assert f["src"].startswith("data:image/png;base64,")
        img = Image.open(io.BytesIO(base64.b64decode(f["src"].split(",", 1)[1])))
        img.save("%s/%02d.png" % (grid_dir, i))
        pred = f["pred"].rsplit(" ", 1)[0]
        assert pred in names, (pred, names)
        assert f["wrong"] == (f["truth"] is not None), f
        if f["truth"]: assert f["truth"].startswith("true: ") and f["truth"][6:] != pred
        out.write("%02d.png %s\n" % (i, pred))
shot = Image.open(shot_file).convert("RGB")
colours = len(set(shot.resize((320, 600)).getdata()))
assert shot.size == (1280, 2400) and colours > 50, (shot.size, colours)
print("page: 4 charts of 3 epochs, %dx%d matrix = metrics.jsonl, %d images (%d wrong), "
      "screenshot %d colours" % (len(matrix), len(matrix), len(d.figures),
                                 sum(f["wrong"] for f in d.figures), colours))
EOF

# The grid's captions are the model's answers for the pictures shown.
"$BIN" predict --snapshot "$(ls "$run"/snapshot_e0003*.h5 | head -1)" --top-k 1 "$WORK/grid" \
  > "$WORK/predict.log" 2>&1 || { cat "$WORK/predict.log"; fail "predict failed"; }
while read -r file pred; do
  got=$(grep -A1 "/$file\$" "$WORK/predict.log" | tail -1 | sed -E 's/^ *1\. +[0-9.]+% +//')
  [ "$got" = "$pred" ] || fail "$file: the page says '$pred', predict says '$got'"
done < "$WORK/grid/captions.txt"

# Not a run directory: an error naming it, no page.
mkdir -p "$WORK/empty"
if "$BIN" report "$WORK/empty" > "$WORK/bad.log" 2>&1; then fail "report of an empty directory succeeded"; fi
grep -q "metrics.jsonl" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the error does not name metrics.jsonl"; }
[ ! -e "$WORK/empty/report.html" ] || fail "a failed report left a page"
pass "report page renders with curves, the run's confusion matrix and predict's answers"
