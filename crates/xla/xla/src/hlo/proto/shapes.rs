//! Shapes and layouts: text (`f32[3,8]{1,0}`, `(s32[], token[])`) ⇄ `xla.ShapeProto`,
//! with XLA's default layout where the text writes none, as XLA's parser fills it.

use std::fmt::Write;

use super::schema::xla::{LayoutProto, PrimitiveType, ShapeProto, TileProto};
use crate::hlo::shape::{parse_shape_all, Shape};

/// XLA's size of an unbounded dynamic dimension (`?`).
const UNBOUNDED: i64 = i64::MIN;

/// XLA's tile dimension that combines (`*` in `T(*,128)`).
const COMBINE: i64 = i64::MIN;

/// The element type of a text name (`f32`, `pred`, `opaque`...).
pub(crate) fn element_type(name: &str) -> Option<PrimitiveType> {
    match name {
        "opaque" => Some(PrimitiveType::OpaqueType),
        "tuple" | "buffer" | "primitive_type_invalid" => None,
        _ => PrimitiveType::from_str_name(&name.to_ascii_uppercase()),
    }
}

/// The text name of an element type; `None` for those text has no name for.
pub(crate) fn element_name(ty: PrimitiveType) -> Option<String> {
    match ty {
        PrimitiveType::OpaqueType => Some("opaque".into()),
        PrimitiveType::Tuple | PrimitiveType::Buffer | PrimitiveType::Invalid => None,
        _ => Some(ty.as_str_name().to_ascii_lowercase()),
    }
}

/// The element type of a proto's `element_type`, or an error naming the value.
pub(crate) fn proto_element_type(value: i32) -> Result<PrimitiveType, String> {
    PrimitiveType::try_from(value)
        .map_err(|_| format!("unknown xla.PrimitiveType value {value} in a shape"))
}

/// XLA's default layout of a `rank`-dimensional array (major to minor).
pub(crate) fn default_layout(rank: usize) -> LayoutProto {
    LayoutProto {
        minor_to_major: (0..rank as i64).rev().collect(),
        tail_padding_alignment_in_elements: 1,
        ..LayoutProto::default()
    }
}

/// A parsed text shape as a proto, layouts filled where the text writes none.
pub(crate) fn shape_to_proto(shape: &Shape) -> Result<ShapeProto, String> {
    match shape {
        Shape::Tuple(elements) => Ok(ShapeProto {
            element_type: PrimitiveType::Tuple as i32,
            tuple_shapes: elements
                .iter()
                .map(shape_to_proto)
                .collect::<Result<_, _>>()?,
            ..ShapeProto::default()
        }),
        Shape::Array {
            ty,
            dims,
            dynamic,
            layout,
        } => {
            let element = element_type(ty).ok_or_else(|| format!("unknown element type `{ty}`"))?;
            let mut out = ShapeProto {
                element_type: element as i32,
                ..ShapeProto::default()
            };
            if matches!(element, PrimitiveType::Token | PrimitiveType::OpaqueType) {
                if !dims.is_empty() || layout.is_some() {
                    return Err(format!("`{shape}`: a {ty} has no sizes or layout"));
                }
                return Ok(out);
            }
            for (d, is_dynamic) in dims.iter().zip(dynamic) {
                // The text reader holds `?` as a dynamic -1.
                out.dimensions.push(if *is_dynamic && *d == -1 {
                    UNBOUNDED
                } else {
                    *d
                });
                out.is_dynamic_dimension.push(*is_dynamic);
            }
            out.layout = Some(Box::new(match layout {
                Some(text) => parse_layout(text, dims.len())?,
                None => default_layout(dims.len()),
            }));
            Ok(out)
        }
    }
}

/// A whole text shape as a proto.
pub(crate) fn parse_shape_proto(text: &str) -> Result<ShapeProto, String> {
    shape_to_proto(&parse_shape_all(text.trim())?)
}

/// Parses a layout's braces (`{1,0}`, `{1,0:T(8,128)(2,1)E(4)S(1)}`) for a `rank`-dimensional
/// array.
pub(crate) fn parse_layout(text: &str, rank: usize) -> Result<LayoutProto, String> {
    let inner = text
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| format!("a layout is written `{{...}}`, found `{text}`"))?;
    let (order, extras) = inner.split_once(':').unwrap_or((inner, ""));
    let mut layout = LayoutProto {
        minor_to_major: parse_ints(order, ',')?,
        tail_padding_alignment_in_elements: 1,
        ..LayoutProto::default()
    };
    let mut sorted = layout.minor_to_major.clone();
    sorted.sort_unstable();
    if sorted != (0..rank as i64).collect::<Vec<_>>() && !(order.trim().is_empty() && rank == 0) {
        return Err(format!(
            "layout `{text}` is not a permutation of the {rank} dimensions"
        ));
    }
    let mut rest = extras.trim();
    while !rest.is_empty() {
        let open = rest
            .find('(')
            .ok_or_else(|| format!("bad layout item `{rest}` in `{text}`"))?;
        let key = &rest[..open];
        let close = rest[open..]
            .find(')')
            .ok_or_else(|| format!("unclosed `(` in layout `{text}`"))?
            + open;
        let arg = &rest[open + 1..close];
        rest = &rest[close + 1..];
        match key {
            "T" => {
                let mut tile = vec![tile_dims(arg)?];
                while rest.starts_with('(') {
                    let close = rest
                        .find(')')
                        .ok_or_else(|| format!("unclosed `(` in layout `{text}`"))?;
                    tile.push(tile_dims(&rest[1..close])?);
                    rest = &rest[close + 1..];
                }
                layout
                    .tiles
                    .extend(tile.into_iter().map(|dimensions| TileProto { dimensions }));
            }
            "L" => layout.tail_padding_alignment_in_elements = one_int(arg, text)?,
            "E" => layout.element_size_in_bits = one_int(arg, text)?,
            "S" => layout.memory_space = one_int(arg, text)?,
            "#" | "*" => {
                let ty = element_type(arg.trim())
                    .ok_or_else(|| format!("unknown element type `{arg}` in layout `{text}`"))?
                    as i32;
                if key == "#" {
                    layout.index_primitive_type = ty;
                } else {
                    layout.pointer_primitive_type = ty;
                }
            }
            _ => {
                return Err(format!(
                    "layout item `{key}(...)` in `{text}` is not mapped to the proto"
                ))
            }
        }
    }
    Ok(layout)
}

/// `a,b,*` of a tile.
fn tile_dims(text: &str) -> Result<Vec<i64>, String> {
    text.split(',')
        .map(|d| match d.trim() {
            "*" => Ok(COMBINE),
            d => d.parse().map_err(|_| format!("bad tile size `{d}`")),
        })
        .collect()
}

fn one_int(arg: &str, text: &str) -> Result<i64, String> {
    arg.trim()
        .parse()
        .map_err(|_| format!("bad number `{arg}` in layout `{text}`"))
}

/// Integers separated by `sep` (none when `text` is blank).
pub(crate) fn parse_ints(text: &str, sep: char) -> Result<Vec<i64>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(sep)
        .map(|d| {
            d.trim()
                .parse()
                .map_err(|_| format!("expected an integer, found `{}`", d.trim()))
        })
        .collect()
}

/// A shape as XLA prints it (layouts as the proto holds them).
pub(crate) fn print_shape(shape: &ShapeProto) -> Result<String, String> {
    let mut out = String::new();
    print_shape_into(shape, &mut out)?;
    Ok(out)
}

fn print_shape_into(shape: &ShapeProto, out: &mut String) -> Result<(), String> {
    let ty = proto_element_type(shape.element_type)?;
    if ty == PrimitiveType::Tuple {
        if !shape.dimensions.is_empty() || shape.layout.is_some() {
            return Err("a tuple shape with sizes or a layout".into());
        }
        out.push('(');
        for (k, e) in shape.tuple_shapes.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
                if k % 5 == 0 {
                    let _ = write!(out, "/*index={k}*/");
                }
            }
            print_shape_into(e, out)?;
        }
        out.push(')');
        return Ok(());
    }
    let name = element_name(ty).ok_or_else(|| format!("element type {ty:?} has no text"))?;
    if !shape.tuple_shapes.is_empty() {
        return Err(format!("a {name} shape with tuple elements"));
    }
    if shape.is_dynamic_dimension.len() > shape.dimensions.len() {
        return Err("more is_dynamic_dimension flags than dimensions".into());
    }
    out.push_str(&name);
    out.push('[');
    for (k, d) in shape.dimensions.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        let dynamic = shape.is_dynamic_dimension.get(k).copied().unwrap_or(false);
        match (dynamic, *d) {
            (true, UNBOUNDED) => out.push('?'),
            (true, d) => {
                let _ = write!(out, "<={d}");
            }
            (false, d) => {
                let _ = write!(out, "{d}");
            }
        }
    }
    out.push(']');
    if let Some(layout) = &shape.layout {
        out.push_str(&print_layout(layout, shape.dimensions.len())?);
    }
    Ok(())
}

/// A layout as XLA prints it after a shape: empty for a plain scalar layout.
pub(crate) fn print_layout(layout: &LayoutProto, rank: usize) -> Result<String, String> {
    let unmapped = [
        (!layout.dim_level_types.is_empty(), "dim_level_types"),
        (!layout.dim_unique.is_empty(), "dim_unique"),
        (!layout.dim_ordered.is_empty(), "dim_ordered"),
        (layout.physical_shape.is_some(), "physical_shape"),
        (
            layout.dynamic_shape_metadata_prefix_bytes != 0,
            "dynamic_shape_metadata_prefix_bytes",
        ),
        (!layout.split_configs.is_empty(), "split_configs"),
    ];
    if let Some((_, field)) = unmapped.iter().find(|(set, _)| *set) {
        return Err(format!(
            "layout field xla.LayoutProto.{field} is not mapped to text"
        ));
    }
    if layout.minor_to_major.len() != rank {
        return Err(format!(
            "layout {:?} of a {rank}-dimensional shape",
            layout.minor_to_major
        ));
    }
    let mut extras = String::new();
    for tile in &layout.tiles {
        if extras.is_empty() {
            extras.push('T');
        }
        extras.push('(');
        let dims: Vec<String> = tile
            .dimensions
            .iter()
            .map(|d| {
                if *d == COMBINE {
                    "*".to_string()
                } else {
                    d.to_string()
                }
            })
            .collect();
        extras.push_str(&dims.join(","));
        extras.push(')');
    }
    if layout.tail_padding_alignment_in_elements > 1 {
        let _ = write!(extras, "L({})", layout.tail_padding_alignment_in_elements);
    }
    for (value, key) in [
        (layout.index_primitive_type, '#'),
        (layout.pointer_primitive_type, '*'),
    ] {
        if value != 0 {
            let ty = proto_element_type(value)?;
            let name = element_name(ty).ok_or_else(|| format!("{ty:?} in a layout"))?;
            let _ = write!(extras, "{key}({name})");
        }
    }
    if layout.element_size_in_bits != 0 {
        let _ = write!(extras, "E({})", layout.element_size_in_bits);
    }
    if layout.memory_space != 0 {
        let _ = write!(extras, "S({})", layout.memory_space);
    }
    if rank == 0 && extras.is_empty() {
        return Ok(String::new());
    }
    let order: Vec<String> = layout.minor_to_major.iter().map(i64::to_string).collect();
    Ok(if extras.is_empty() {
        format!("{{{}}}", order.join(","))
    } else {
        format!("{{{}:{extras}}}", order.join(","))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_round_trip_with_default_layouts() {
        for (text, printed) in [
            ("f32[3,8]", "f32[3,8]{1,0}"),
            ("f32[3,8]{0,1}", "f32[3,8]{0,1}"),
            ("pred[]", "pred[]"),
            (
                "(s32[], (f32[2], token[]))",
                "(s32[], (f32[2]{0}, token[]))",
            ),
            ("s32[<=5,?]", "s32[<=5,?]{1,0}"),
            (
                "bf16[2,128]{1,0:T(8,128)(2,1)}",
                "bf16[2,128]{1,0:T(8,128)(2,1)}",
            ),
            ("s4[8]{0:E(4)S(1)}", "s4[8]{0:E(4)S(1)}"),
            (
                "f32[4]{0:T(*,128)L(2)#(s64)*(u32)}",
                "f32[4]{0:T(*,128)L(2)#(s64)*(u32)}",
            ),
            ("opaque[]", "opaque[]"),
            ("f8e4m3fn[2]", "f8e4m3fn[2]{0}"),
        ] {
            let p = parse_shape_proto(text).unwrap();
            assert_eq!(print_shape(&p).unwrap(), printed, "{text}");
        }
        let p = parse_shape_proto("f32[2,3]").unwrap();
        assert_eq!(p.layout.unwrap().tail_padding_alignment_in_elements, 1);
        let scalar = parse_shape_proto("f32[]").unwrap();
        assert!(scalar.layout.unwrap().minor_to_major.is_empty());
    }

    #[test]
    fn bad_layouts_are_named() {
        assert!(parse_shape_proto("f32[2,3]{0,0}")
            .unwrap_err()
            .contains("not a permutation"));
        assert!(parse_shape_proto("f32[2]{0:D(C)}")
            .unwrap_err()
            .contains("`D(...)`"));
        let mut p = parse_shape_proto("f32[2]").unwrap();
        p.layout.as_mut().unwrap().dim_level_types = vec![1];
        assert!(print_shape(&p).unwrap_err().contains("dim_level_types"));
        p.element_type = 99;
        assert!(print_shape(&p)
            .unwrap_err()
            .contains("PrimitiveType value 99"));
    }
}
