/** The release this kernel implements (SPEC.md): the API description's version, and what a manifest's `kernel` range is matched against. */
export const RELEASE = '0.1.8';
