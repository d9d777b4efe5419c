//! The one JUnit reader of the tests: every test case of a JUnit file (classname, name and
//! failure message, XML-unescaped) and how many test suites it has, read with an XML parser
//! that checks end tags, so a malformed report fails whichever test reads it.

use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};

/// One `<testcase>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub classname: String,
    pub name: String,
    /// The `message` of its `<failure>`, when it failed.
    pub failure: Option<String>,
}

/// A JUnit file as the tests read it.
#[derive(Debug)]
pub struct Junit {
    pub suites: usize,
    pub cases: Vec<Case>,
}

/// Reads `xml`; panics (failing the test) when it is not well-formed.
pub fn parse(xml: &str) -> Junit {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let mut junit = Junit {
        suites: 0,
        cases: Vec::new(),
    };
    loop {
        match reader
            .read_event()
            .expect("JUnit report is well-formed XML")
        {
            Event::Start(e) | Event::Empty(e) => {
                let attr = |key: &str| {
                    e.attributes()
                        .map(|a| a.expect("a well-formed attribute"))
                        .find(|a| a.key.as_ref() == key)
                        .map(|a| {
                            a.normalized_value(XmlVersion::Implicit1_0)
                                .expect("an attribute value that unescapes")
                                .into_owned()
                        })
                };
                match e.name().as_ref() {
                    "testsuite" => junit.suites += 1,
                    "testcase" => junit.cases.push(Case {
                        classname: attr("classname").unwrap_or_default(),
                        name: attr("name").expect("a test case has a name"),
                        failure: None,
                    }),
                    "failure" => {
                        let case = junit.cases.last_mut().expect("a failure inside a case");
                        case.failure = Some(attr("message").expect("a failure has a message"));
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    junit
}

#[test]
fn reads_cases_failures_and_suites() {
    let junit = parse(
        r#"<?xml version="1.0"?><testsuites><testsuite name="s"><testcase classname="c" name="a &amp; b"/><testcase classname="c" name="x"><failure message="too &lt;big&gt;">body</failure></testcase></testsuite></testsuites>"#,
    );
    assert_eq!(junit.suites, 1);
    assert_eq!(
        junit.cases,
        [
            Case {
                classname: "c".into(),
                name: "a & b".into(),
                failure: None
            },
            Case {
                classname: "c".into(),
                name: "x".into(),
                failure: Some("too <big>".into())
            },
        ]
    );
}

#[test]
#[should_panic(expected = "well-formed")]
fn a_malformed_report_fails() {
    parse("<testsuites><testsuite></testsuites>");
}
