//! Laying a plot's lines out: which columns make the panels, which make a line's style
//! (its colour and marker), and the words of titles and legend. Pure logic over the rows'
//! values of the label columns.
//!
//! A style is one configuration, the same colour and marker in every panel, named once in
//! the figure's legend. Panels split by what was measured (the workload: decoder, payload,
//! mode, rate) before how (topology, transport, doorbell...), so the CPU and GPU runs of
//! one decoder share a panel.
#![forbid(unsafe_code)]

use super::words::{describe, noun, words, DECODER_OPTIONS};
use super::PROVENANCE;

/// A row (or group of rows) to draw, with its values of the label columns.
pub(super) type Item<T> = (Vec<String>, T);

/// Columns that say how a row was served, not what: split into panels only when no
/// other split keeps them readable.
const SYSTEM: &[&str] = &[
    "topology",
    "data_path",
    "links",
    "transport",
    "rx_completion",
    "doorbell",
    "pollers",
    "pollers_per_slot",
    DECODER_OPTIONS,
    "gpus",
    "csv",
];

/// One panel: its title (what its lines share, in words) and its lines, each with its
/// style (an index into [`Layout::legend`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Panel<T> {
    pub title: String,
    pub series: Vec<(usize, T)>,
}

/// Panels, and one legend label per style in order of first appearance.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout<T> {
    pub panels: Vec<Panel<T>>,
    pub legend: Vec<String>,
    /// Words every line shares where they apply (`inline completion` of the GPU lines),
    /// left out of the legend: for the figure's subtitle.
    pub shared: Vec<String>,
}

/// Lays `items` (each with its values of `columns`) out in panels of at most
/// `max_series` lines and, where it can, at most `max_styles` styles in all. The panel
/// columns are the set of at most three columns that does this with the fewest system
/// columns ([`SYSTEM`]), then the fewest panels and styles together.
pub fn layout<T>(
    columns: &[&str],
    items: Vec<Item<T>>,
    max_series: usize,
    max_styles: usize,
) -> Layout<T> {
    if items.is_empty() {
        return Layout {
            panels: Vec::new(),
            legend: Vec::new(),
            shared: Vec::new(),
        };
    }
    let varying: Vec<usize> = (0..columns.len())
        .filter(|&j| items.iter().any(|(v, _)| v[j] != items[0].0[j]))
        .collect();
    let candidates = informative(varying.clone(), &items, columns);
    let mut best: Option<(Vec<usize>, Score)> = None;
    for subset in subsets(&candidates, 3) {
        let s = score(columns, &subset, &varying, &items, max_series, max_styles);
        if best.as_ref().is_none_or(|(_, b)| s < *b) {
            best = Some((subset, s));
        }
    }
    let facets = best.map(|b| b.0).unwrap_or_default();
    if !facets.is_empty() && items.len() > max_series && !has_shared_panel(&facets, &items) {
        // One line per panel: a few panels of several lines, in order, say more.
        return chunks(columns, &varying, items, max_series);
    }
    build(columns, &facets, &varying, items)
}

/// Ordered: infeasible last; then fewer system columns split on, fewer panels and
/// styles together, fewer panels.
type Score = (bool, usize, usize, usize);

fn score<T>(
    columns: &[&str],
    facets: &[usize],
    varying: &[usize],
    items: &[Item<T>],
    max_series: usize,
    max_styles: usize,
) -> Score {
    let styles = distinct(items, &series_columns(facets, varying, items)).len();
    let panel_keys: Vec<Vec<&String>> = items.iter().map(|(v, _)| key(v, facets)).collect();
    let panels = distinct(items, facets).len();
    let largest = panel_keys
        .iter()
        .map(|k| panel_keys.iter().filter(|o| *o == k).count())
        .max()
        .unwrap_or(0);
    let system = facets
        .iter()
        .filter(|&&j| SYSTEM.contains(&columns[j]))
        .count();
    (
        largest > max_series || styles > max_styles,
        system,
        panels + styles,
        panels,
    )
}

fn key<'a>(v: &'a [String], cols: &[usize]) -> Vec<&'a String> {
    cols.iter().map(|&j| &v[j]).collect()
}

/// The distinct keys of `items` on `cols`, in order of first appearance.
fn distinct<'a, T>(items: &'a [Item<T>], cols: &[usize]) -> Vec<Vec<&'a String>> {
    let mut out: Vec<Vec<&String>> = Vec::new();
    for (v, _) in items {
        let k = key(v, cols);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// Varying columns whose value is the same across every panel's items: they follow from
/// the panel (the payload of a decoder's model).
fn determined_by<T>(facets: &[usize], varying: &[usize], items: &[Item<T>]) -> Vec<usize> {
    varying
        .iter()
        .copied()
        .filter(|j| !facets.contains(j))
        .filter(|&j| {
            items.iter().all(|(a, _)| {
                items
                    .iter()
                    .all(|(b, _)| a[j] == b[j] || facets.iter().any(|&f| a[f] != b[f]))
            })
        })
        .collect()
}

/// The columns that make a line's style: every varying column not split on and not
/// following from the panel.
fn series_columns<T>(facets: &[usize], varying: &[usize], items: &[Item<T>]) -> Vec<usize> {
    let fixed = determined_by(facets, varying, items);
    varying
        .iter()
        .copied()
        .filter(|j| !facets.contains(j) && !fixed.contains(j))
        .collect()
}

fn build<T>(
    columns: &[&str],
    facets: &[usize],
    varying: &[usize],
    items: Vec<Item<T>>,
) -> Layout<T> {
    let series_cols = series_columns(facets, varying, &items);
    let mut title_cols: Vec<usize> = facets.to_vec();
    title_cols.extend(determined_by(facets, varying, &items));
    title_cols.retain(|j| !PROVENANCE.contains(&columns[*j]) || facets.contains(j));
    title_cols.sort_unstable();
    let keys = natural_order(distinct(&items, &series_cols));
    let names: Vec<&str> = series_cols.iter().map(|&j| columns[j]).collect();
    let (legend, shared) = legend_labels(&names, &keys);
    let panel_order = natural_order(distinct(&items, facets));
    let mut panels: Vec<(Vec<String>, Panel<T>)> = Vec::new();
    for (v, item) in items {
        let style_key: Vec<String> = series_cols.iter().map(|&j| v[j].clone()).collect();
        let style = keys.iter().position(|k| *k == style_key).unwrap_or(0);
        let panel_key: Vec<String> = facets.iter().map(|&j| v[j].clone()).collect();
        match panels.iter_mut().find(|p| p.0 == panel_key) {
            Some(p) => p.1.series.push((style, item)),
            None => {
                let mut title = describe(columns, &title_cols, &v);
                if title.is_empty() && !facets.is_empty() {
                    // The rows to which what splits the panels does not apply.
                    let names: Vec<&str> = facets.iter().map(|&j| noun(columns[j])).collect();
                    title = format!("{}: not applicable", names.join(", "));
                }
                panels.push((
                    panel_key,
                    Panel {
                        title,
                        series: vec![(style, item)],
                    },
                ));
            }
        }
    }
    panels.sort_by_key(|p| panel_order.iter().position(|k| *k == p.0));
    Layout {
        panels: panels.into_iter().map(|p| p.1).collect(),
        legend,
        shared,
    }
}

/// `keys` (in order of first appearance) sorted column by column: numerically where a
/// column's values are all numbers (rates, payloads, pollers), else in order of first
/// appearance (a sweep's own order: cpu before gpu).
fn natural_order(keys: Vec<Vec<&String>>) -> Vec<Vec<String>> {
    let width = keys.first().map_or(0, Vec::len);
    let rank = |p: usize, v: &String| -> f64 {
        let numeric = keys.iter().all(|k| k[p].parse::<f64>().is_ok());
        if numeric {
            v.parse().unwrap_or(0.0)
        } else {
            keys.iter().position(|k| k[p] == v).unwrap_or(0) as f64
        }
    };
    let mut ranked: Vec<(Vec<f64>, Vec<String>)> = keys
        .iter()
        .map(|k| {
            let r = (0..width).map(|p| rank(p, k[p])).collect();
            (r, k.iter().map(|v| (*v).clone()).collect())
        })
        .collect();
    ranked.sort_by(|a, b| {
        a.0.iter()
            .zip(&b.0)
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    ranked.into_iter().map(|r| r.1).collect()
}

/// Legend labels for the style `keys` (values of the columns `names`, one key per
/// style), and the words left out of them because every style that has the column shares
/// its value. Labels are the words of the columns that tell styles apart; where words
/// cannot (two values without words), the raw `column=value`.
pub fn legend_labels(names: &[&str], keys: &[Vec<String>]) -> (Vec<String>, Vec<String>) {
    let mut shown: Vec<usize> = (0..names.len()).collect();
    let mut shared = Vec::new();
    let label = |shown: &[usize], k: &Vec<String>| describe(names, shown, k);
    let unique = |shown: &[usize]| {
        let mut labels: Vec<String> = keys.iter().map(|k| label(shown, k)).collect();
        labels.sort();
        labels.windows(2).all(|w| w[0] != w[1])
    };
    for p in (0..names.len()).rev() {
        let mut said: Vec<String> = keys.iter().filter_map(|k| words(names[p], &k[p])).collect();
        said.sort();
        said.dedup();
        let rest: Vec<usize> = shown.iter().copied().filter(|&q| q != p).collect();
        if said.len() <= 1 && (keys.len() == 1 || unique(&rest)) {
            shown = rest;
            shared.extend(said);
        }
    }
    shared.reverse();
    let mut labels: Vec<String> = keys.iter().map(|k| label(&shown, k)).collect();
    if keys.len() > 1 && (!unique(&shown) || labels.iter().any(String::is_empty)) {
        labels = keys
            .iter()
            .map(|k| {
                (0..names.len())
                    .map(|p| format!("{}={}", names[p], k[p]))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .collect();
    }
    (labels, shared)
}

/// Whether some two items fall into the same panel when split by `facets`.
fn has_shared_panel<T>(facets: &[usize], items: &[Item<T>]) -> bool {
    let mut keys: Vec<Vec<&String>> = items.iter().map(|(v, _)| key(v, facets)).collect();
    keys.sort();
    keys.windows(2).any(|w| w[0] == w[1])
}

/// `items` in order, `max_series` to a panel, untitled, a style per item.
fn chunks<T>(
    columns: &[&str],
    varying: &[usize],
    items: Vec<Item<T>>,
    max_series: usize,
) -> Layout<T> {
    let keys = natural_order(distinct(&items, varying));
    let names: Vec<&str> = varying.iter().map(|&j| columns[j]).collect();
    let (legend, shared) = legend_labels(&names, &keys);
    let mut panels: Vec<Panel<T>> = Vec::new();
    for (v, item) in items {
        let k: Vec<String> = varying.iter().map(|&j| v[j].clone()).collect();
        let style = keys.iter().position(|x| *x == k).unwrap_or(0);
        match panels.last_mut() {
            Some(p) if p.series.len() < max_series => p.series.push((style, item)),
            _ => panels.push(Panel {
                title: String::new(),
                series: vec![(style, item)],
            }),
        }
    }
    Layout {
        panels,
        legend,
        shared,
    }
}

/// `varying` without the columns whose value follows from the others' (a `gpu` column
/// that only repeats whether the topology uses one), the latest column first; where
/// columns follow from each other, the one that says where a row ran goes first, then a
/// system column, and a workload column stays.
fn informative<T>(varying: Vec<usize>, items: &[Item<T>], columns: &[&str]) -> Vec<usize> {
    let mut order = varying.clone();
    let rank = |c: &str| {
        if PROVENANCE.contains(&c) {
            0
        } else if SYSTEM.contains(&c) {
            1
        } else {
            2
        }
    };
    order.sort_by_key(|&j| (rank(columns[j]), std::cmp::Reverse(j)));
    let mut kept = varying;
    for j in order {
        let others: Vec<usize> = kept.iter().copied().filter(|&k| k != j).collect();
        if others.is_empty() {
            continue;
        }
        let determined = items.iter().all(|(a, _)| {
            items
                .iter()
                .all(|(b, _)| a[j] == b[j] || others.iter().any(|&k| a[k] != b[k]))
        });
        if determined {
            kept.retain(|&k| k != j);
        }
    }
    kept
}

/// Every subset of `of` with at most `most` members, smallest first, each in order.
fn subsets(of: &[usize], most: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for size in 1..=most.min(of.len()) {
        let mut next = Vec::new();
        for s in out.iter().filter(|s| s.len() == size - 1) {
            let from = s.last().map_or(0, |&last| {
                of.iter().position(|&x| x == last).unwrap_or(0) + 1
            });
            for &x in &of[from..] {
                let mut t = s.clone();
                t.push(x);
                next.push(t);
            }
        }
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests;
