"""Plots a bench_engine.py result as an SVG: each request's time to first token, in order, one line per configuration.

``python bench_engine_plot.py RESULT.json OUT.svg [--run N]``. Standard library only. The first round (every
document cold) is shaded; in the later rounds a configuration whose external cache holds the documents falls to its
load time, and one without stays at the cost of computing them again.
"""

import argparse
import json

COLOURS = {"none": "#c0392b", "local": "#7f8c8d", "kvstash": "#2471a3", "lmcache": "#27ae60", "offload": "#8e44ad"}
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 360, 60, 130, 40, 50


def plot(result, run):
    runs = [r for r in result["runs"] if r["run"] == run and r.get("requests")]
    count = max(len(r["requests"]) for r in runs)
    top = max(q["ttft_s"] for r in runs for q in r["requests"]) * 1.05
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i):
        return LEFT + plot_w * i / max(1, count - 1)

    def y(v):
        return TOP + plot_h * (1 - v / top)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
           % (WIDTH, HEIGHT), '<rect width="100%" height="100%" fill="white"/>']
    cold = [i for i, q in enumerate(runs[0]["requests"]) if q["round"] == 0]
    if cold:
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f2f2f2"/>'
                   % (x(cold[0]), TOP, x(cold[-1]) - x(cold[0]), plot_h))
        out.append('<text x="%.1f" y="%d" fill="#555">round 1: every document cold</text>' % (x(cold[0]) + 4, TOP + 14))
    step = 0.5 if top > 1.5 else 0.25
    tick = 0.0
    while tick <= top:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   % (LEFT, LEFT + plot_w, y(tick), y(tick)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.2g s</text>' % (LEFT - 6, y(tick) + 4, tick))
        tick += step
    labels = []
    for r in runs:
        points = " ".join("%.1f,%.1f" % (x(i), y(q["ttft_s"])) for i, q in enumerate(r["requests"]))
        colour = COLOURS.get(r["peer"], "black")
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"/>' % (points, colour))
        labels.append([y(r["requests"][-1]["ttft_s"]) + 4, colour, r["peer"]])
    labels.sort()
    for above, below in zip(labels, labels[1:]):            # at least a line apart
        below[0] = max(below[0], above[0] + 14)
    for label_y, colour, peer in labels:
        out.append('<text x="%d" y="%.1f" fill="%s">%s</text>' % (LEFT + plot_w + 8, label_y, colour, peer))
    out.append('<text x="%d" y="%d" text-anchor="middle">request, in the order sent (%d documents x %d rounds)</text>'
               % (LEFT + plot_w / 2, HEIGHT - 12, len(cold), count // max(1, len(cold))))
    out.append('<text x="%d" y="22" font-size="14">Time to first token, vLLM CPU engine, run %d (%s)</text>'
               % (LEFT, run + 1, result.get("started", "")))
    out.append("</svg>")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result")
    parser.add_argument("svg")
    parser.add_argument("--run", type=int, default=0, help="which run of a --repeat result (0 first)")
    args = parser.parse_args()
    with open(args.result) as f:
        result = json.load(f)
    with open(args.svg, "w") as out:
        out.write(plot(result, args.run))


if __name__ == "__main__":
    main()
