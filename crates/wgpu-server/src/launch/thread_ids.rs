//! What the index proof (`indices.rs`) knows of thread ids: the builtins'
//! ranges in an entry point, and the private globals naga's SPIR-V front
//! end copies them into.

use naga::{
    AddressSpace, Binding, BuiltIn, EntryPoint, Expression, Function, GlobalVariable, Handle,
    Module, Statement,
};

use super::intervals::{Range, union};

/// Per component, the values a thread-id builtin may take in `entry`:
/// `local_invocation_id` below the workgroup size; `local_invocation_index`
/// and `subgroup_id` below its product (a workgroup has at most one
/// subgroup per invocation); `subgroup_invocation_id` below 128, the
/// largest subgroup Vulkan and WebGPU allow.
pub(crate) fn builtin(entry: &EntryPoint, argument: u32, component: Option<u32>) -> Option<Range> {
    let arg = entry.function.arguments.get(argument as usize)?;
    let Some(Binding::BuiltIn(b)) = arg.binding else {
        return None;
    };
    if entry.workgroup_size_overrides.is_some() {
        return None;
    }
    let size = entry.workgroup_size.map(i128::from);
    match (b, component) {
        (BuiltIn::LocalInvocationId, Some(c)) => Some((0, size.get(c as usize)? - 1)),
        (BuiltIn::LocalInvocationIndex | BuiltIn::SubgroupId, None) => {
            Some((0, size.iter().product::<i128>() - 1))
        }
        (BuiltIn::SubgroupInvocationId, None) => Some((0, 127)),
        _ => None,
    }
}

/// Private globals that hold nothing but a thread-id builtin (naga's
/// SPIR-V front end copies each input into one at the entry point, and the
/// kernel's function loads it): per component, the union of what every
/// store to it writes and its zero initial value. A global with any other
/// store, or passed to a call, has none.
pub(crate) fn builtins_in_privates(module: &Module) -> Vec<(Handle<GlobalVariable>, [Range; 3])> {
    let mut ranges: Vec<(Handle<GlobalVariable>, Option<[Range; 3]>)> = Vec::new();
    let mut note = |g: Handle<GlobalVariable>, stored: Option<[Range; 3]>| match ranges
        .iter_mut()
        .find(|(h, _)| *h == g)
    {
        Some((_, r)) => {
            *r = r
                .zip(stored)
                .map(|(a, b)| std::array::from_fn(|i| union(a[i], b[i])));
        }
        None => ranges.push((g, stored.map(|b| b.map(|r| union(r, (0, 0)))))),
    };
    let functions = (module.functions.iter()).map(|(_, f)| (f, None));
    let entries = (module.entry_points.iter()).map(|e| (&e.function, Some(e)));
    for (f, entry) in functions.chain(entries) {
        super::termination::walk(&f.body, &mut |s| match *s {
            Statement::Store { pointer, value } => {
                let Some(g) = private_under(module, f, pointer) else {
                    return;
                };
                // Its initial value is its initializer's, not zero.
                if module.global_variables[g].init.is_some() {
                    return note(g, None);
                }
                let whole = matches!(f.expressions[pointer], Expression::GlobalVariable(_));
                let stored = match (&f.expressions[value], entry) {
                    (&Expression::FunctionArgument(a), Some(e)) if whole => {
                        let c = |i| builtin(e, a, Some(i)).or_else(|| builtin(e, a, None));
                        c(0).zip(c(1)).zip(c(2)).map(|((x, y), z)| [x, y, z])
                    }
                    _ => None,
                };
                note(g, stored);
            }
            Statement::Call { ref arguments, .. } => {
                for &a in arguments {
                    if let Some(g) = private_under(module, f, a) {
                        note(g, None);
                    }
                }
            }
            _ => {}
        });
    }
    ranges
        .into_iter()
        .filter_map(|(g, r)| Some((g, r?)))
        .collect()
}

/// The private global `pointer` points into, if any.
fn private_under(
    module: &Module,
    f: &Function,
    pointer: Handle<Expression>,
) -> Option<Handle<GlobalVariable>> {
    match f.expressions[pointer] {
        Expression::GlobalVariable(g) => {
            (module.global_variables[g].space == AddressSpace::Private).then_some(g)
        }
        Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => {
            private_under(module, f, base)
        }
        _ => None,
    }
}
