//! Self-contained HTML pages: no network, no script from elsewhere; a picture's SVG inline,
//! a legend, a box to find a node by name, and sections of text, tables and charts.

use std::fmt::Write as _;

use crate::dot::LEGEND;

/// `text` with HTML's special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A section of a page: an id (for links and tests), a heading and HTML.
#[derive(Clone, Debug)]
pub struct Section {
    /// The element id.
    pub id: String,
    /// The heading.
    pub heading: String,
    /// The body, HTML.
    pub html: String,
}

impl Section {
    /// A section.
    pub fn new(id: &str, heading: &str, html: String) -> Section {
        Section {
            id: id.into(),
            heading: heading.into(),
            html,
        }
    }
}

/// A `<ul>` of lines (escaped).
pub fn list(lines: &[String]) -> String {
    let mut out = String::from("<ul>\n");
    for l in lines {
        let _ = writeln!(out, "<li>{}</li>", escape(l));
    }
    out.push_str("</ul>\n");
    out
}

/// A `<pre>` of text (escaped).
pub fn pre(text: &str) -> String {
    format!("<pre>{}</pre>\n", escape(text))
}

/// The legend of the marks' colours.
pub fn legend() -> String {
    let mut out = String::from("<div class=\"legend\">");
    for (kind, colour, words) in LEGEND {
        let border = if kind == "output" { "3px" } else { "1px" };
        let _ = write!(
            out,
            "<span class=\"key\"><span class=\"swatch\" style=\"background:{colour};border-width:{border}\"></span>{}</span>",
            escape(words)
        );
    }
    out.push_str(
        "<span class=\"key\"><span class=\"swatch\" style=\"background:#e9ecef\"></span>copies of a repeated layer, folded</span></div>\n",
    );
    out
}

/// A picture's SVG with a box to find a node by name; `id` names the figure.
pub fn figure(id: &str, svg: &str) -> String {
    // The XML prolog has no place inside HTML.
    let svg = svg.find("<svg").map(|start| &svg[start..]).unwrap_or(svg);
    format!(
        "<div class=\"find\"><input type=\"search\" placeholder=\"find a node by name\" data-figure=\"{id}\" oninput=\"findNode(this)\"><span class=\"found\"></span></div>\n<div class=\"figure\" id=\"{id}\">\n{svg}</div>\n"
    )
}

/// A chart of a series of points (`x`, `y`) as an inline SVG polyline with labelled axes.
pub fn line_chart(id: &str, x_label: &str, y_label: &str, points: &[(f64, f64)]) -> String {
    const W: f64 = 560.0;
    const H: f64 = 240.0;
    const PAD: f64 = 44.0;
    if points.is_empty() {
        return "<p>No points.</p>\n".into();
    }
    let max_x = points.iter().map(|p| p.0).fold(1.0f64, f64::max);
    let max_y = points.iter().map(|p| p.1).fold(1.0f64, f64::max);
    let sx = |x: f64| PAD + x / max_x * (W - 2.0 * PAD);
    let sy = |y: f64| H - PAD - y / max_y * (H - 2.0 * PAD);
    let path: Vec<String> = points
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
        .collect();
    let mut out = format!(
        "<svg id=\"{id}\" class=\"chart\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" xmlns=\"http://www.w3.org/2000/svg\">\n<line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#333\"/><line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\" stroke=\"#333\"/>\n",
        b = H - PAD,
        r = W - PAD
    );
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{}</text><text x=\"12\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>",
        W / 2.0,
        H - 8.0,
        escape(x_label),
        H / 2.0,
        H / 2.0,
        escape(y_label)
    );
    let _ = writeln!(
        out,
        "<text x=\"{PAD}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">0</text><text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{max_x}</text><text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{max_y}</text>",
        H - PAD + 14.0,
        W - PAD,
        H - PAD + 14.0,
        PAD - 4.0,
        PAD + 4.0
    );
    let _ = writeln!(
        out,
        "<polyline fill=\"none\" stroke=\"#1c7ed6\" stroke-width=\"2\" points=\"{}\"/>",
        path.join(" ")
    );
    for &(x, y) in points {
        let _ = writeln!(
            out,
            "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#1c7ed6\"><title>{x}: {y}</title></circle>",
            sx(x),
            sy(y)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// The whole page.
pub fn page(title: &str, sections: &[Section]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"generator\" content=\"graphbug\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
    if sections.len() > 1 {
        out.push_str("<nav>");
        for s in sections {
            let _ = write!(out, "<a href=\"#{}\">{}</a> ", s.id, escape(&s.heading));
        }
        out.push_str("</nav>\n");
    }
    for s in sections {
        let _ = write!(
            out,
            "<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n",
            s.id,
            escape(&s.heading),
            s.html
        );
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// The page's style.
const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;color:#212529}\
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #dee2e6;padding-bottom:.2em}\
nav a{margin-right:1em}pre{background:#f8f9fa;padding:.8em;overflow:auto;font-size:.85em}\
.figure{overflow:auto;max-height:85vh;border:1px solid #dee2e6}\
.legend{margin:.5em 0;font-size:.85em}.key{margin-right:1.2em;white-space:nowrap}\
.swatch{display:inline-block;width:1em;height:1em;border:1px solid #333;margin-right:.3em;vertical-align:middle}\
.find{margin:.5em 0}.found{margin-left:1em;font-size:.85em}\
.hit polygon,.hit path{stroke:#f59f00;stroke-width:5}\
table{border-collapse:collapse}td,th{border:1px solid #dee2e6;padding:.2em .6em;text-align:left}";

/// The page's one script: finding a node by name in a figure; the page's load time (in
/// `body[data-load-ms]`, which tests and benchmarks read).
const SCRIPT: &str = "window.addEventListener('load',function(){document.body.setAttribute('data-load-ms',Math.round(performance.now()))});\
function findNode(input){\
var fig=document.getElementById(input.dataset.figure);var out=input.parentNode.querySelector('.found');\
fig.querySelectorAll('.hit').forEach(function(e){e.classList.remove('hit')});\
var q=input.value.trim();if(!q){out.textContent='';return}\
var hits=Array.prototype.filter.call(fig.querySelectorAll('g.node'),function(g){var id=g.id||'';return id.slice(id.indexOf(':')+1)===q});\
if(!hits.length){hits=Array.prototype.filter.call(fig.querySelectorAll('g.node'),function(g){return (g.id||'').indexOf(q)>=0})}\
hits.forEach(function(g){g.classList.add('hit')});\
out.textContent=hits.length?hits.length+' found':'not drawn';\
if(hits.length){hits[0].scrollIntoView({block:'center',inline:'center'})}}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_escape_what_they_show_and_fetch_nothing() {
        let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\"><g id=\"graph:a\"/></svg>";
        let page = page(
            "a <b> & c",
            &[
                Section::new("s", "x<y", pre("if a < b && c > d")),
                Section::new("f", "figure", figure("f1", svg)),
                Section::new("c", "chart", line_chart("c1", "x", "y", &[(0.0, 1.0)])),
            ],
        );
        assert!(page.contains("<title>a &lt;b&gt; &amp; c</title>"));
        assert!(page.contains("if a &lt; b &amp;&amp; c &gt; d"));
        assert!(page.contains("<section id=\"s\">"));
        // Nothing is loaded from elsewhere: no source or link out of the page.
        for attribute in ["src=", "href=\"http", "url(", "@import"] {
            assert!(!page.contains(attribute), "{attribute} in the page");
        }
    }

    #[test]
    fn charts_have_a_point_per_step() {
        let chart = line_chart(
            "c",
            "queries",
            "nodes",
            &[(0.0, 10.0), (1.0, 5.0), (2.0, 1.0)],
        );
        assert_eq!(chart.matches("class=\"point\"").count(), 3);
        assert!(chart.contains("<polyline"));
    }

    #[test]
    fn figures_drop_the_xml_prolog() {
        let fig = figure("f", "<?xml version=\"1.0\"?>\n<svg><g/></svg>");
        assert!(!fig.contains("<?xml"));
        assert!(fig.contains("<svg><g/></svg>"));
    }
}
