"""prom_parse.py - reads an exposition with the Prometheus project's own Python parser
(Debian's python3-prometheus-client) and prints every sample on a line of its own, for the
shell tests to compare with the queue:

    NAME{LABEL="VALUE",...} VALUE

labels sorted by name, values as integers where they are whole. `--format openmetrics` uses
prometheus_client.openmetrics.parser (strict: TYPE/UNIT/HELP, counters' _total, histograms'
buckets in order and their +Inf equal to _count, `# EOF`), `--format prometheus` the text
format 0.0.4 parser (what the node exporter's textfile collector reads). A parse error is
printed on stderr and exits 1.

usage: prom_parse.py --format openmetrics|prometheus FILE
"""
import sys


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "--format":
        print(__doc__, file=sys.stderr)
        return 2
    fmt, path = sys.argv[2], sys.argv[3]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        if fmt == "openmetrics":
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
        elif fmt == "prometheus":
            from prometheus_client.parser import text_string_to_metric_families
        else:
            print("unknown format " + fmt, file=sys.stderr)
            return 2
        families = list(text_string_to_metric_families(text))
    except ImportError as e:
        print("prom_parse: python3-prometheus-client is missing (make test-deps): %s" % e,
              file=sys.stderr)
        return 1
    except ValueError as e:
        print("prom_parse: %s: not valid %s: %s" % (path, fmt, e), file=sys.stderr)
        return 1
    for fam in families:
        print("# family %s %s %s" % (fam.name, fam.type, fam.unit or "-"))
        for s in fam.samples:
            labels = ",".join('%s="%s"' % (k, s.labels[k]) for k in sorted(s.labels))
            v = s.value
            value = "%d" % v if float(v).is_integer() else repr(float(v))
            print("%s{%s} %s" % (s.name, labels, value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
