// ml-cart and ml-logistic-regression ship no types: what the registry uses of them.
declare module 'ml-cart' {
  interface TreeOptions {
    gainFunction?: string;
    splitFunction?: string;
    minNumSamples?: number;
    maxDepth?: number;
    gainThreshold?: number;
  }
  interface TreeNode {
    classify(row: number[]): { to1DArray(): number[] } | number;
  }
  export class DecisionTreeClassifier {
    constructor(options?: TreeOptions);
    root: TreeNode;
    train(x: number[][], y: number[]): void;
    predict(x: number[][]): number[];
    toJSON(): unknown;
    static load(model: unknown): DecisionTreeClassifier;
  }
  export class DecisionTreeRegression {
    constructor(options?: TreeOptions);
    train(x: number[][], y: number[]): void;
    predict(x: number[][]): number[];
    toJSON(): unknown;
    static load(model: unknown): DecisionTreeRegression;
  }
}

declare module 'ml-logistic-regression' {
  import type { Matrix } from 'ml-matrix';
  export default class LogisticRegression {
    constructor(options?: { numSteps?: number; learningRate?: number });
    classifiers: { testScores(x: Matrix): number[] }[];
    numberClasses: number;
    train(x: Matrix, y: Matrix): void;
    predict(x: Matrix): number[];
    toJSON(): unknown;
    static load(model: unknown): LogisticRegression;
  }
}
