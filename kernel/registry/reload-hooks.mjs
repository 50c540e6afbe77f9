// Module resolve hook, registered by kernel/main.ts with `module.register`.
//
// A plugin's entry is imported as `index.ts?generation=N` on every (re)load. Node caches modules by
// URL, so without this hook the modules the entry imports would keep their first version forever.
// The hook gives every module a plugin imports (directly or not) the same `generation` query, so
// a reload re-evaluates the plugin's whole module tree. The kernel's own modules (`shared` roots)
// and node_modules keep one instance: a plugin must see the kernel's classes and its zod.

let sharedRoots = [];

export async function initialize(data) {
  sharedRoots = data?.sharedRoots ?? [];
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (!context.parentURL || !resolved.url.startsWith('file:')) return resolved;
  const generation = new URL(context.parentURL).searchParams.get('generation');
  if (!generation) return resolved;
  const url = new URL(resolved.url);
  if (url.pathname.includes('/node_modules/') || sharedRoots.some((root) => url.pathname.startsWith(root))) return resolved;
  url.searchParams.set('generation', generation);
  return { ...resolved, url: url.href };
}
