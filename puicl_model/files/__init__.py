"""Files: ``puicl`` on the command line, CSV and Parquet tables read and written a batch at a
time, and scoring a pool on a dask cluster.

The top wing: it imports the others, none imports it.
"""
