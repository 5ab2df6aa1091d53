console.error('npm start: the local environment is not implemented yet');
process.exit(1);
