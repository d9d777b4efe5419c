//! The HTML, Markdown and JUnit reports on real fixtures, built through the library exactly as
//! the CLI builds its `Outcome`: the HTML is well-formed, self-contained, has its charts and
//! names, and shows hostile ONNX names only escaped; Markdown and JUnit carry the verdict and
//! the first divergence.
//!
//! `ALIGN_CHECK_HTML_OUT=report.html` (with `ALIGN_CHECK_HTML_MODEL=DIR` holding model.pt,
//! model.onnx and inputs.npz; default the fault_conv_weight fixture) makes
//! `write_report_named_by_env` write that model's HTML report there (with the Markdown and
//! JUnit reports beside it, as .md and .junit.xml), for screenshots and the examples in
//! reports/example/. `ALIGN_CHECK_HTML_LAYERS=N` repeats the layers up to N first, to try a
//! large network. Without the variables it writes to a scratch folder; either way it checks
//! the three files it wrote.

use crate::common::fixture;
use align_check::outcome::{Isolated, LayerResult, Outcome, Verdict};
use align_check::report::{html, junit, markdown};
use clap::Parser;
use quick_xml::events::Event;
use quick_xml::Reader;
use quick_xml::XmlVersion;
use std::path::Path;

const SCRIPT_PAYLOAD: &str = "<script>alert(1)</script>";
const IMG_PAYLOAD: &str = "<img src=x onerror";

fn outcome_of_dir(dir: &Path) -> Outcome {
    let (pt, onnx, npz) = (
        dir.join("model.pt"),
        dir.join("model.onnx"),
        dir.join("inputs.npz"),
    );
    let cli = align_check::cli::Cli::try_parse_from([
        "align-check",
        pt.to_str().unwrap(),
        onnx.to_str().unwrap(),
        "--inputs",
        npz.to_str().unwrap(),
    ])
    .unwrap();
    let cfg = align_check::cli::config::CheckConfig::from_args(&cli.check).unwrap();
    let progress = align_check::app::progress::Progress::new(false);
    align_check::app::check::outcome(&cfg, &progress).unwrap()
}

fn outcome_of(name: &str) -> Outcome {
    outcome_of_dir(&fixture(name))
}

fn html_of(outcome: &Outcome) -> String {
    String::from_utf8(html::render(outcome).unwrap()).expect("the report is UTF-8")
}

/// What a structural walk of the page found.
#[derive(Default)]
struct Structure {
    /// Every `src`/`href` attribute value, unescaped.
    links: Vec<String>,
    /// Element names in document order.
    elements: Vec<String>,
    /// Element names that the page opens with `id` attribute values.
    ids: Vec<String>,
}

/// Parses the page as XML (it is written as XHTML-compatible HTML): every tag closed in
/// order, every entity valid. Panics with the position of the first problem.
fn walk(doc: &str) -> Structure {
    let mut reader = Reader::from_str(doc);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<String> = Vec::new();
    let mut found = Structure::default();
    loop {
        let event = reader
            .read_event()
            .unwrap_or_else(|e| panic!("not well-formed at {}: {e}", reader.buffer_position()));
        let (start, empty) = match &event {
            Event::Start(s) => (Some(s.clone()), false),
            Event::Empty(s) => (Some(s.clone()), true),
            _ => (None, false),
        };
        if let Some(s) = start {
            let name = s.name().as_ref().to_string();
            for attr in s.attributes() {
                let attr = attr.unwrap_or_else(|e| panic!("bad attribute in <{name}>: {e}"));
                let value = attr
                    .normalized_value(XmlVersion::Implicit1_0)
                    .expect("attribute entities are valid");
                match attr.key.as_ref() {
                    "src" | "href" | "xlink:href" | "action" | "formaction" => {
                        found.links.push(value.into_owned())
                    }
                    "id" => found.ids.push(value.into_owned()),
                    _ => {}
                }
            }
            found.elements.push(name.clone());
            if !empty {
                stack.push(name);
            }
        }
        match event {
            Event::End(e) => {
                let name = e.name().as_ref().to_string();
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.as_str()),
                    "unbalanced </{name}>"
                );
            }
            Event::GeneralRef(r) => {
                let ok = if r.is_char_ref() {
                    r.resolve_char_ref().ok().flatten().is_some()
                } else {
                    matches!(&*r.into_inner(), "lt" | "gt" | "amp" | "quot" | "apos")
                };
                assert!(ok, "unknown entity at {}", reader.buffer_position());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(stack.is_empty(), "unclosed elements at the end: {stack:?}");
    found
}

fn assert_self_contained(doc: &str, s: &Structure) {
    for link in &s.links {
        assert!(
            link.starts_with('#') || link.starts_with("data:"),
            "the page points outside itself: {link}"
        );
    }
    for tag in [
        "link", "iframe", "img", "object", "embed", "base", "audio", "video",
    ] {
        assert!(
            !s.elements.iter().any(|e| e == tag),
            "the page has a <{tag}> element"
        );
    }
    let scripts = s.elements.iter().filter(|e| *e == "script").count();
    assert_eq!(scripts, 1, "exactly one (inline) script");
    assert!(
        !doc.contains("@import") && !doc.contains("url("),
        "CSS must not load anything"
    );
}

/// One network chart plus, per detail, a histogram and the scatter and channel charts the
/// detail has data for.
fn expected_charts(outcome: &Outcome) -> usize {
    1 + outcome
        .details
        .iter()
        .map(|d| {
            1 + usize::from(!d.scatter.is_empty()) + usize::from(!d.channel_max_abs.is_empty())
        })
        .sum::<usize>()
}

#[test]
fn fault_report_is_well_formed_self_contained_and_names_the_divergence() {
    let outcome = outcome_of("fault_conv_weight");
    let doc = html_of(&outcome);
    let s = walk(&doc);
    assert_self_contained(&doc, &s);

    assert!(!outcome.details.is_empty(), "a fault has detail layers");
    assert_eq!(doc.matches("<svg").count(), expected_charts(&outcome));
    assert_eq!(
        s.elements.iter().filter(|e| *e == "svg").count(),
        expected_charts(&outcome)
    );

    let d = outcome
        .first_divergence
        .as_ref()
        .expect("the fault diverges");
    assert_eq!(d.module, "layer1.1.bn2");
    let headline = &doc[doc.find("<p class=\"sentence\">").unwrap()..];
    let headline = &headline[..headline.find("</p>").unwrap()];
    assert!(headline.contains("<code>layer1.1.bn2</code>"), "{headline}");
    let source = d
        .source
        .as_deref()
        .expect("traced models record a source line");
    assert!(headline.contains(source), "{headline}");

    // Table cells mark where long names may wrap; the names are whole without the marks.
    let unwrapped = doc.replace("<wbr/>", "");
    for l in &outcome.layers {
        assert!(
            s.ids.contains(&format!("layer-{}", l.index)),
            "row of layer {}",
            l.index
        );
        for name in [&l.module, &l.onnx_node] {
            if !name.is_empty() {
                assert!(
                    unwrapped.contains(&format!("<code>{name}</code>")),
                    "{name}"
                );
            }
        }
    }
    // The module tree: nested <details>, each top-level module named.
    // A failing run isolates: the table has an isolated column, the network chart the isolated
    // curve and its legend, and the first divergence's close-up its error in isolation.
    assert!(doc.contains(">isolated</th>"));
    let network = &doc[doc.find("<svg").unwrap()..];
    let network = &network[..network.find("</svg>").unwrap()];
    assert!(
        network.contains("error in isolation"),
        "isolated legend entry"
    );
    assert!(doc.contains("<dt>error / range in isolation</dt>"));
    for top in ["layer1", "layer2", "fc"] {
        assert!(doc.contains(&format!("{top}</b>")), "tree node {top}");
    }
    assert!(s.elements.iter().filter(|e| *e == "details").count() >= 4);
    for (k, _) in outcome.details.iter().enumerate() {
        assert!(s.ids.contains(&format!("detail-{k}")));
    }
    for v in [
        &outcome.environment.libtorch,
        &outcome.environment.onnxruntime,
        &outcome.onnx_model.sha256,
    ] {
        assert!(doc.contains(v.as_str()), "header shows {v}");
    }
}

#[test]
fn hostile_names_are_only_ever_escaped() {
    let outcome = outcome_of("hostile_names_legacy");
    assert!(
        outcome
            .layers
            .iter()
            .any(|l| l.onnx_node.contains(SCRIPT_PAYLOAD)),
        "the fixture carries the payload in its node names"
    );
    let doc = html_of(&outcome);
    assert!(
        !doc.contains(SCRIPT_PAYLOAD) && !doc.contains(IMG_PAYLOAD),
        "raw payload in HTML"
    );
    assert!(doc.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(doc.contains("&lt;img src=x onerror=alert(1)&gt;"));
    let s = walk(&doc);
    assert_self_contained(&doc, &s);
    assert!(!s.elements.iter().any(|e| e == "img"));

    let xml = junit::render(&outcome);
    assert!(
        !xml.contains(SCRIPT_PAYLOAD) && !xml.contains(IMG_PAYLOAD),
        "raw payload in JUnit"
    );
    let cases = junit_cases(&xml);
    assert!(
        cases.iter().any(|(name, _)| name.contains(SCRIPT_PAYLOAD)),
        "{cases:?}"
    );

    let md = markdown::render(&outcome);
    for line in md.lines().filter(|l| l.contains('<')) {
        // Outside code spans only our own <sub> tag may appear.
        let outside: String = line.split('`').step_by(2).collect();
        assert!(
            !outside.contains("<script") && !outside.contains("<img"),
            "{line}"
        );
    }
}

/// (test case name, failure message) of every test case, after XML unescaping, of a report
/// with one test suite.
fn junit_cases(xml: &str) -> Vec<(String, Option<String>)> {
    let junit = crate::junit_xml::parse(xml);
    assert_eq!(junit.suites, 1, "one test suite");
    junit
        .cases
        .into_iter()
        .map(|c| (c.name, c.failure))
        .collect()
}

#[test]
fn markdown_and_junit_carry_verdict_and_first_divergence() {
    let fault = outcome_of("fault_conv_weight");
    let md = markdown::render(&fault);
    assert!(md.contains("FAIL"), "{md}");
    assert!(
        md.contains("**First divergence at** `layer1.1.bn2`"),
        "{md}"
    );
    let source = fault
        .first_divergence
        .as_ref()
        .unwrap()
        .source
        .clone()
        .unwrap();
    assert!(md.contains(&source), "{md}");
    assert!(md.contains("### Worst layers (10 of 21"), "{md}");
    assert!(md.contains("not accounted for"), "{md}");

    let cases = junit_cases(&junit::render(&fault));
    let layer1 = cases
        .iter()
        .find(|(name, _)| name == "layer1")
        .expect("a case for the layer1 group");
    let message = layer1.1.as_deref().expect("layer1 fails");
    assert!(message.contains("layer1.1.bn2 (error"), "{message}");
    assert!(cases
        .iter()
        .any(|(n, f)| n == "output logits" && f.is_some()));
    assert!(
        cases.iter().any(|(n, f)| n == "bn1" && f.is_none()),
        "{cases:?}"
    );

    let clean = outcome_of("conv_bn_legacy");
    assert!(markdown::render(&clean).contains("PASS"));
    let xml = junit::render(&clean);
    assert!(!xml.contains("<failure"), "{xml}");
    let cases = junit_cases(&xml);
    // One case per output, per top-level module, the coverage gate and the production gate.
    assert_eq!(cases.len(), 1 + 4 + 1 + 1, "{cases:?}");
}

/// The fault outcome with its layers repeated to `n`, as a stand-in for a large network.
fn enlarged(mut outcome: Outcome, n: usize) -> Outcome {
    let base: Vec<LayerResult> = outcome.layers.clone();
    outcome.layers = (0..n)
        .map(|i| {
            let mut l = base[i % base.len()].clone();
            l.index = i;
            l.module = format!("blocks.{}.{}", i / base.len(), l.module);
            l
        })
        .collect();
    outcome
}

#[test]
fn reports_of_thousands_of_layers_stay_small() {
    let outcome = enlarged(outcome_of("fault_conv_weight"), 2500);
    let started = std::time::Instant::now();
    let doc = html_of(&outcome);
    let took = started.elapsed();
    assert!(doc.len() < 5 << 20, "{} bytes", doc.len());
    let s = walk(&doc);
    assert_self_contained(&doc, &s);
    assert_eq!(
        s.ids
            .iter()
            .filter(|id| id
                .strip_prefix("layer-")
                .is_some_and(|n| n.parse::<usize>().is_ok()))
            .count(),
        2500
    );
    // The network chart draws at most one point per bucket of layers.
    let chart = &doc[doc.find("<svg").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert!(
        chart.matches("<circle").count() <= 510,
        "network chart is aggregated"
    );
    assert!(took.as_secs_f64() < 5.0, "rendering took {took:?}");
}

/// Writes the three human-facing reports of one model to `ALIGN_CHECK_HTML_OUT` (or a scratch
/// file when unset) and checks what was written: the page is well-formed and self-contained
/// with a row per layer, and the Markdown and JUnit files beside it carry the verdict.
#[test]
fn write_report_named_by_env() {
    let scratch = tempfile::tempdir().unwrap();
    let out: std::path::PathBuf = std::env::var_os("ALIGN_CHECK_HTML_OUT")
        .map(Into::into)
        .unwrap_or_else(|| scratch.path().join("report.html"));
    let dir = std::env::var_os("ALIGN_CHECK_HTML_MODEL")
        .map(Into::into)
        .unwrap_or_else(|| fixture("fault_conv_weight"));
    let outcome = outcome_of_dir(&dir);
    let layers: usize = std::env::var("ALIGN_CHECK_HTML_LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let outcome = if layers > outcome.layers.len() {
        enlarged(outcome, layers)
    } else {
        outcome
    };
    std::fs::write(&out, html::render(&outcome).unwrap()).unwrap();
    std::fs::write(out.with_extension("md"), markdown::render(&outcome)).unwrap();
    std::fs::write(out.with_extension("junit.xml"), junit::render(&outcome)).unwrap();

    let doc = std::fs::read_to_string(&out).expect("the HTML report was written");
    let s = walk(&doc);
    assert_self_contained(&doc, &s);
    for l in &outcome.layers {
        assert!(
            s.ids.contains(&format!("layer-{}", l.index)),
            "row of layer {}",
            l.index
        );
    }
    let pass = outcome.verdict == Verdict::Pass;
    let verdict = if pass { "PASS" } else { "FAIL" };
    let md = std::fs::read_to_string(out.with_extension("md")).expect("the Markdown was written");
    assert!(md.contains(verdict), "{md}");
    let xml = std::fs::read_to_string(out.with_extension("junit.xml"))
        .expect("the JUnit report was written");
    let cases = junit_cases(&xml);
    assert!(!cases.is_empty(), "{xml}");
    assert_eq!(
        cases.iter().all(|(_, failure)| failure.is_none()),
        pass,
        "{xml}"
    );
}

#[test]
fn degenerate_outcomes_still_render() {
    let clean = outcome_of("conv_bn_legacy");

    // Non-finite statistics: NaN and infinite errors must not break the charts or the page.
    let mut odd = clean.clone();
    odd.layers[1].cmp.rel_to_range = f64::NAN;
    odd.layers[1].cmp.max_abs = f64::INFINITY;
    odd.layers[1].cmp.pass = false;
    odd.layers[2].cmp.rel_to_range = f64::INFINITY;
    odd.layers[2].cmp.snr_db = f64::NEG_INFINITY;
    odd.layers[3].cmp.rel_to_range = 0.0;
    // Isolated errors that a log axis cannot hold, and a layer isolation could not compute.
    for (l, rel) in [(0, 0.0), (1, f64::NAN), (2, f64::INFINITY), (3, 1e-30)] {
        odd.layers[l].isolated = Some(Isolated {
            max_abs: rel,
            rel_to_range: rel,
            pass: rel == 0.0,
            snr_db: None,
            rounding_floor: None,
            tied: false,
            nonfinite_mismatch: 0,
        });
    }
    for d in &mut odd.details {
        d.scatter.push([f32::NAN, 1.0]);
        d.channel_max_abs.push(f64::NAN);
    }
    let doc = html_of(&odd);
    assert_self_contained(&doc, &walk(&doc));

    // Nothing compared at all.
    let mut empty = clean;
    empty.layers.clear();
    empty.details.clear();
    empty.outputs.clear();
    empty.first_divergence = None;
    empty.divergence_origins.clear();
    let doc = html_of(&empty);
    let s = walk(&doc);
    assert_self_contained(&doc, &s);
    assert_eq!(doc.matches("<svg").count(), 1, "the network chart, empty");
    junit_cases(&junit::render(&empty));
    assert!(markdown::render(&empty).contains("PASS"));
}
