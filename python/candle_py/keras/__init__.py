"""`candle_py.keras`: a Keras-like front end over `candle_py.nn` modules.

    from candle_py import keras, nn
    model = keras.Sequential([nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)])
    model.compile(optimizer="adam", loss="cross_entropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, epochs=5, batch_size=32, validation_split=0.1)
    model.evaluate(x_test, y_test); model.predict(x_test); model.summary()
    model.save("model.safetensors"); model.load_weights("model.safetensors")

`Model(module)` wraps any `nn.Module`; its weights keep the module's state_dict
keys, so a saved file loads into the bare module (and into PyTorch) too.
"""

from . import callbacks, models
from .callbacks import *  # noqa: F403
from .models import *  # noqa: F403

__all__ = ["callbacks"]
__all__ += models.__all__
__all__ += callbacks.__all__
