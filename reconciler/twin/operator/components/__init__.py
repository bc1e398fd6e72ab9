"""One module per simulated component of the GPU Operator's stack on the twin, each a class with one job over
the shared OperatorCache (reconciler/twin/operator/cache.py); reconciler/twin/operator/controller.py runs them."""
