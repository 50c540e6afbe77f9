/**
 * Models trained elsewhere, as ONNX, served through onnxruntime-node (its CPU binary; inference
 * runs on onnxruntime's own threads, so `run` does not block the event loop). A model is loaded and
 * checked against what its importer declared (the features it reads, the output it answers) before
 * it is accepted.
 */
import ort from 'onnxruntime-node';
import { problems, type FieldError } from '../../kernel/plugin-api.ts';
import type { Task } from './algorithms.ts';
import type { Feature } from './encoding.ts';

export interface OnnxOutput {
  /** The model output read (default: its first). */
  name?: string;
  task: Task;
  /** A classifier's class names, by class index (its output's integer labels, or its score columns). */
  labels?: string[];
}

/** An imported model as stored: the ONNX bytes (base64) and what was declared of it. */
export interface OnnxArtifact {
  algorithm: 'onnx';
  task: Task;
  features: Feature[];
  output: OnnxOutput & { name: string };
  onnx: string;
}

export interface LoadedOnnx {
  predict(rows: Record<string, unknown>[]): Promise<{ predictions: unknown[]; probabilities?: Record<string, number>[] }>;
}

type TensorInfo = { name: string; isTensor: true; type: string; shape: (number | string)[] } | { name: string; isTensor: false };

const FLOATS = new Set(['float32', 'float64']);
const INTEGERS = new Set(['int32', 'int64']);
/** The element types a feature of each type may be fed as. */
const ELEMENT_TYPES: Record<Feature['type'], Set<string>> = {
  number: FLOATS,
  integer: new Set([...FLOATS, ...INTEGERS]),
  string: new Set(['string']),
  boolean: new Set(['bool']),
};

const fileError = (message: string) => problems.badRequest(`the file is not a usable ONNX model: ${message}`, [{ path: 'body.file', message }]);

/** A dimension that is the batch (or any size): dynamic, or -1. */
const free = (dim: number | string) => typeof dim === 'string' || dim < 0;

/**
 * How the declared features reach the model: one input per feature (named as the feature, shape
 * [n] or [n, 1]), or every feature packed in declared order into a single input of shape [n, k]
 * (sklearn-onnx's `float_input`).
 */
type Feeding = { packed: TensorInfo & { isTensor: true } } | { each: (TensorInfo & { isTensor: true })[] };

function feedingOf(inputs: TensorInfo[], features: Feature[]): Feeding {
  const errors: FieldError[] = [];
  const fail = (message: string) => problems.badRequest(`the declared features do not fit the model: ${message}`, [{ path: 'body.features', message }]);
  const tensors = inputs.filter((i): i is TensorInfo & { isTensor: true } => i.isTensor);
  if (tensors.length !== inputs.length) throw fail(`input ${inputs.find((i) => !i.isTensor)!.name} is not a tensor`);
  const [only] = tensors;
  const packedWidth = only?.shape.length === 2 ? only.shape[1] : null;
  if (tensors.length === 1 && packedWidth !== null && (features.length > 1 || !features.some((f) => f.name === only.name))) {
    if (!free(packedWidth) && packedWidth !== features.length) throw fail(`input ${only.name} takes ${packedWidth} features, ${features.length} are declared`);
    features.forEach((f, i) => {
      if (!ELEMENT_TYPES[f.type].has(only.type)) errors.push({ path: `body.features.${i}.type`, message: `input ${only.name} holds ${only.type}: a ${f.type} feature cannot be fed to it` });
    });
    if (errors.length) throw problems.badRequest(`the declared features do not fit the model's input ${only.name}`, errors);
    return { packed: only };
  }
  if (tensors.length !== features.length) throw fail(`the model has ${tensors.length} inputs (${tensors.map((t) => t.name).join(', ')}), ${features.length} features are declared`);
  const each = features.map((f, i) => {
    const input = tensors.find((t) => t.name === f.name);
    const path = `body.features.${i}`;
    if (!input) errors.push({ path: `${path}.name`, message: `the model has no input ${f.name} (its inputs: ${tensors.map((t) => t.name).join(', ')})` });
    else if (!ELEMENT_TYPES[f.type].has(input.type)) errors.push({ path: `${path}.type`, message: `input ${f.name} holds ${input.type}, not a ${f.type}` });
    else if (input.shape.length < 1 || input.shape.length > 2 || (input.shape.length === 2 && !free(input.shape[1]) && input.shape[1] !== 1)) errors.push({ path, message: `input ${f.name} has shape [${input.shape.join(', ')}], not one value per row` });
    return input!;
  });
  if (errors.length) throw problems.badRequest('the declared features do not fit the model\u2019s inputs', errors);
  return { each };
}

/** The output read, checked against the declared task; answers its name. */
function outputOf(outputs: TensorInfo[], declared: OnnxOutput): TensorInfo & { isTensor: true } {
  const name = declared.name ?? outputs[0]?.name;
  const output = outputs.find((o) => o.name === name);
  const fail = (message: string) => problems.badRequest(`the declared output does not fit the model: ${message}`, [{ path: 'body.output', message }]);
  if (!output) throw fail(`the model has no output ${name} (its outputs: ${outputs.map((o) => o.name).join(', ')})`);
  // A sequence of maps (sklearn-onnx's ZipMap probabilities) is not a tensor onnxruntime-node can answer.
  if (!output.isTensor) throw fail(`output ${name} is not a tensor (onnxruntime-node reads tensors only)`);
  if (declared.task === 'regression' && !FLOATS.has(output.type)) throw fail(`output ${name} holds ${output.type}, not the numbers of a regression`);
  if (declared.task === 'classification' && !FLOATS.has(output.type) && !INTEGERS.has(output.type) && output.type !== 'string') throw fail(`output ${name} holds ${output.type}: a classifier answers labels or scores per class`);
  const scores = output.shape.length === 2 && FLOATS.has(output.type) && declared.task === 'classification';
  if (scores && declared.labels && !free(output.shape[1]) && output.shape[1] !== declared.labels.length) throw fail(`output ${name} scores ${output.shape[1]} classes, ${declared.labels.length} labels are declared`);
  return output;
}

function tensorOf(type: string, values: unknown[], dims: number[]): ort.Tensor {
  switch (type) {
    case 'float32':
      return new ort.Tensor('float32', Float32Array.from(values, (v) => (v === null ? NaN : Number(v))), dims);
    case 'float64':
      return new ort.Tensor('float64', Float64Array.from(values, (v) => (v === null ? NaN : Number(v))), dims);
    case 'int32':
      return new ort.Tensor('int32', Int32Array.from(values, (v) => Number(v)), dims);
    case 'int64':
      return new ort.Tensor('int64', BigInt64Array.from(values, (v) => BigInt(v as number)), dims);
    case 'bool':
      return new ort.Tensor('bool', Uint8Array.from(values, (v) => (v ? 1 : 0)), dims);
    default:
      return new ort.Tensor('string', values.map(String), dims);
  }
}

/**
 * Loads ONNX bytes and checks them against what was declared: the inputs take the features, the
 * output exists and fits the task, and one row of neutral values (0, '', false) runs through it.
 * Each problem is a 400 naming the field (`body.file`, `body.features.<i>`, `body.output`).
 */
export async function loadOnnx(bytes: Uint8Array, features: Feature[], declared: OnnxOutput): Promise<{ model: LoadedOnnx; output: OnnxArtifact['output'] }> {
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(bytes);
  } catch (err) {
    throw fileError((err as Error).message.split('\n')[0].slice(0, 500));
  }
  const inputs = session.inputMetadata as unknown as TensorInfo[];
  const feeding = feedingOf(inputs, features);
  const output = outputOf(session.outputMetadata as unknown as TensorInfo[], declared);
  const labels = declared.labels;

  const feeds = (rows: Record<string, unknown>[]) => {
    for (const [i, row] of rows.entries()) {
      features.forEach((f) => {
        // Floats take NaN for a missing value (what sklearn-onnx's imputers expect); other tensors have no missing value.
        const input = 'packed' in feeding ? feeding.packed : feeding.each.find((t) => t.name === f.name)!;
        if (row[f.name] === null && !FLOATS.has(input.type)) throw problems.badRequest(`body.rows.${i}.${f.name}: an imported model's ${input.type} input has no missing value`, [{ path: `body.rows.${i}.${f.name}`, message: 'missing (the model has no missing value for it)' }]);
      });
    }
    if ('packed' in feeding) return { [feeding.packed.name]: tensorOf(feeding.packed.type, rows.flatMap((row) => features.map((f) => row[f.name])), [rows.length, features.length]) };
    return Object.fromEntries(feeding.each.map((input, i) => [input.name, tensorOf(input.type, rows.map((row) => row[features[i].name]), input.shape.length === 2 ? [rows.length, 1] : [rows.length])]));
  };
  const label = (v: unknown) => {
    const value = typeof v === 'bigint' ? Number(v) : v;
    return labels && typeof value === 'number' && labels[value] !== undefined ? labels[value] : value;
  };

  const model: LoadedOnnx = {
    async predict(rows) {
      const result = (await session.run(feeds(rows), [output.name]))[output.name];
      const values = Array.from(result.data as ArrayLike<unknown>);
      if (declared.task === 'regression') return { predictions: values.map(Number) };
      if (result.dims.length !== 2 || !FLOATS.has(output.type)) return { predictions: values.map(label) };
      // Scores per class: the prediction is the highest, the scores are its probabilities.
      const width = result.dims[1];
      const probabilities = rows.map((_, r) => (values as number[]).slice(r * width, (r + 1) * width));
      return {
        predictions: probabilities.map((p) => label(p.indexOf(Math.max(...p)))),
        probabilities: probabilities.map((p) => Object.fromEntries(p.map((v, c) => [String(label(c)), Math.round(v * 1e6) / 1e6]))),
      };
    },
  };
  const neutral = Object.fromEntries(features.map((f) => [f.name, f.type === 'string' ? '' : f.type === 'boolean' ? false : 0]));
  try {
    await model.predict([neutral]);
  } catch (err) {
    throw fileError(`a trial row does not run through it: ${(err as Error).message.split('\n')[0].slice(0, 500)}`);
  }
  return { model, output: { ...declared, name: output.name } };
}
