// Module resolve hooks, registered by kernel/main.ts with `module.register`.
//
// The plugin SDK: `data-platform/plugin-api` (and `data-platform/testing`) resolve, from a plugin
// in any folder, as the platform's own package resolves them (its package.json `exports`), so a
// plugin folder needs no node_modules of its own and shares the kernel's modules and zod.
//
// A plugin's entry is imported as `index.ts?generation=N` on every (re)load. Node caches modules by
// URL, so without this hook the modules the entry imports would keep their first version forever.
// The hook gives every module a plugin imports (directly or not) the same `generation` query, so
// a reload re-evaluates the plugin's whole module tree. The kernel's own modules (`shared` roots)
// and node_modules keep one instance: a plugin must see the kernel's classes and its zod.

let sharedRoots = [];
let platformPackage;

const SDK = /^data-platform(\/|$)/;

export async function initialize(data) {
  sharedRoots = data?.sharedRoots ?? [];
  platformPackage = data?.platformPackage;
}

export async function resolve(specifier, context, nextResolve) {
  if (platformPackage && SDK.test(specifier)) return nextResolve(specifier, { ...context, parentURL: platformPackage });
  const resolved = await nextResolve(specifier, context);
  if (!context.parentURL || !resolved.url.startsWith('file:')) return resolved;
  const generation = new URL(context.parentURL).searchParams.get('generation');
  if (!generation) return resolved;
  const url = new URL(resolved.url);
  if (url.pathname.includes('/node_modules/') || sharedRoots.some((root) => url.pathname.startsWith(root))) return resolved;
  url.searchParams.set('generation', generation);
  return { ...resolved, url: url.href };
}
