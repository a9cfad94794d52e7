"""The retail demo backend: an SQLite business database and its tools."""

from pipecat_harness.demo.retail_db import DEFAULT_SEED, RetailDatabase
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, ToolHandler, pipecat_function

__all__ = ["DEFAULT_SEED", "RETAIL_WRITE_TOOLS", "RetailDatabase", "RetailTools", "ToolHandler", "pipecat_function"]
